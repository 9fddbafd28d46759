package parse

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// numRun returns the leading run of number characters of s (digits, sign,
// '.', exponent), e.g. "105600" from "105600, K size".
func numRun(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if (c >= '0' && c <= '9') || c == '.' || (i == 0 && (c == '-' || c == '+')) ||
			((c == 'e' || c == 'E') && i > 0) {
			i++
			continue
		}
		break
	}
	// A sentence may end right after the number: "… tokens: 5 > 7."
	return strings.TrimRight(s[:i], ".eE")
}

// uintAfter finds key in s and parses the unsigned integer that follows.
func uintAfter(s, key string) (uint64, bool) {
	i := strings.Index(s, key)
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(numRun(s[i+len(key):]), 10, 64)
	return n, err == nil
}

func intAfter(s, key string) (int64, bool) {
	i := strings.Index(s, key)
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(numRun(s[i+len(key):]), 10, 64)
	return n, err == nil
}

func floatAfter(s, key string) (float64, bool) {
	i := strings.Index(s, key)
	if i < 0 {
		return 0, false
	}
	f, err := strconv.ParseFloat(numRun(s[i+len(key):]), 64)
	return f, err == nil
}

// tokenAfter returns the text after key up to the first byte of stops (or
// the end), e.g. the unquoted rid in "Request abc exceeds".
func tokenAfter(s, key, stops string) (string, bool) {
	i := strings.Index(s, key)
	if i < 0 {
		return "", false
	}
	rest := s[i+len(key):]
	if j := strings.IndexAny(rest, stops); j >= 0 {
		rest = rest[:j]
	}
	return rest, true
}

// pyValueAfter finds key (e.g. "self.rid=") and returns the Python value
// that follows: a quoted string decoded, else the bare token.
func pyValueAfter(s, key string) (string, bool) {
	i := strings.Index(s, key)
	if i < 0 {
		return "", false
	}
	rest := s[i+len(key):]
	if rest != "" && (rest[0] == '\'' || rest[0] == '"') {
		return pyString(rest[:pySkipString(rest, 0)])
	}
	if j := strings.IndexAny(rest, " ,)"); j >= 0 {
		rest = rest[:j]
	}
	return rest, rest != ""
}

// rawString decodes a JSON string, or returns a number's text.
func rawString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return ""
	}
	if raw[0] == '[' {
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) == nil && len(a) > 0 {
			return rawString(a[0])
		}
		return ""
	}
	return string(raw)
}

// rawUint decodes a JSON integer (or a string holding one, or the first
// element of a list) without going through float64: bootstrap rooms use
// all 63 bits (§e).
func rawUint(raw json.RawMessage) (uint64, bool) { return uintText(rawString(raw)) }

func rawFloat(raw json.RawMessage) (float64, bool) { return floatText(rawString(raw)) }

// parseISO parses the timestamps of JSON logs: RFC 3339 with or without a
// zone, 'T' or ' ' separator. Zone-less times are in loc.
func parseISO(s string, loc *time.Location) (time.Time, bool) {
	t, i, ok := parseDateTime(s, loc)
	if !ok {
		return time.Time{}, false
	}
	rest := s[i:]
	if rest == "" || (i > 0 && s[i-1] == 'Z' && rest == "") {
		return t, true
	}
	if len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' {
		h, ok1 := atoiN(rest[1:3])
		m, ok2 := atoiN(rest[4:6])
		if ok1 && ok2 {
			off := h*3600 + m*60
			if rest[0] == '-' {
				off = -off
			}
			y, mo, d := t.Date()
			return time.Date(y, mo, d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.FixedZone("", off)), true
		}
	}
	return time.Time{}, false
}

// epochString converts an epoch number given as text, exactly when it is
// an integer (float64 loses sub-microsecond digits of ms/ns epochs).
func epochString(s, unit string) (time.Time, bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		f := float64(n)
		if unit == "" {
			unit = epochUnit(f)
		}
		switch unit {
		case "ms":
			return time.UnixMilli(n).UTC(), true
		case "us":
			return time.UnixMicro(n).UTC(), true
		case "ns":
			return time.Unix(0, n).UTC(), true
		}
		return time.Unix(n, 0).UTC(), true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return time.Time{}, false
	}
	t := epochTime(f, unit)
	return t, !t.IsZero()
}

func epochUnit(f float64) string {
	switch a := math.Abs(f); {
	case a < 1e11:
		return "s"
	case a < 1e14:
		return "ms"
	case a < 1e17:
		return "us"
	}
	return "ns"
}

// epochTime converts an epoch number in the given unit ("s", "ms", "us",
// "ns"); unit "" guesses from the magnitude (seconds < 1e11 ≤ ms < 1e14 ≤
// µs < 1e17 ≤ ns), which is unambiguous for dates 1973–5138.
func epochTime(f float64, unit string) time.Time {
	if unit == "" {
		unit = epochUnit(f)
	}
	switch unit {
	case "ms":
		f *= 1e6
	case "us":
		f *= 1e3
	case "ns":
	default:
		f *= 1e9
	}
	if math.IsNaN(f) || f > 9e18 || f < -9e18 {
		return time.Time{}
	}
	sec, frac := math.Modf(f / 1e9)
	return time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3).UTC()
}

// bytesView returns b as a string without copying. The result must not be
// kept beyond the parse of the record b belongs to, unless b is never
// modified afterwards: callers clone (strings.Clone) what they keep.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// fieldsN is strings.Fields without the slice: it stores the first
// len(dst) fields of s in dst and returns how many fields s has, counting
// at most len(dst). Fields of non-ASCII text are left to strings.Fields,
// whose Unicode spaces it must match.
func fieldsN(s string, dst []string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			f := strings.Fields(s)
			return copy(dst, f)
		}
	}
	n := 0
	i := 0
	for n < len(dst) {
		for i < len(s) && asciiSpace(s[i]) {
			i++
		}
		if i == len(s) {
			break
		}
		j := i
		for j < len(s) && !asciiSpace(s[j]) {
			j++
		}
		dst[n] = s[i:j]
		n++
		i = j
	}
	return n
}

// asciiSpace is the ASCII white space of strings.Fields.
func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
