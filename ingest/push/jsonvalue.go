package push

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/internal/jsonstr"
)

// unquoteLine decodes a JSON string literal without touching invalid UTF-8.
// encoding/json would replace such bytes with U+FFFD, silently altering the
// evidence; here bytes outside escapes are copied verbatim (escapes decode
// as in encoding/json). raw comes from a json.RawMessage of a document
// json.Unmarshal already validated, so only the type needs checking; a
// malformed escape is still refused.
func unquoteLine(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	return jsonstr.Unquote(string(raw[1:len(raw)-1]), true)
}

// parseUnixNanos parses a Loki timestamp: a decimal count of nanoseconds,
// as a JSON string (the Loki format) or, leniently, a JSON number.
func parseUnixNanos(raw json.RawMessage) (time.Time, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		raw = raw[1 : len(raw)-1]
	}
	ns, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp is not an integer count of nanoseconds")
	}
	return time.Unix(0, ns).UTC(), nil
}

// parseEpochSeconds parses a JSON number of seconds since the Unix epoch.
// Plain decimals are parsed exactly (a float64 cannot hold nanoseconds of
// a current date); exponent forms fall back to float precision.
func parseEpochSeconds(num string) (time.Time, error) {
	intPart, frac, hasFrac := num, "", false
	if i := strings.IndexByte(num, '.'); i >= 0 {
		intPart, frac, hasFrac = num[:i], num[i+1:], true
	}
	if strings.ContainsAny(num, "eE") || len(intPart) > 12 {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f < -1e11 || f > 1e11 { // about ±3000 years
			return time.Time{}, fmt.Errorf("epoch seconds out of range")
		}
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)).UTC(), nil
	}
	sec, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("epoch seconds is not a number")
	}
	var nsec int64
	if hasFrac {
		if len(frac) == 0 {
			return time.Time{}, fmt.Errorf("epoch seconds is not a number")
		}
		if len(frac) > 9 {
			frac = frac[:9] // sub-nanosecond digits are dropped
		}
		for len(frac) < 9 {
			frac += "0"
		}
		nsec, err = strconv.ParseInt(frac, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("epoch seconds is not a number")
		}
		if intPart != "" && intPart[0] == '-' {
			nsec = -nsec
		}
	}
	return time.Unix(sec, nsec).UTC(), nil
}
