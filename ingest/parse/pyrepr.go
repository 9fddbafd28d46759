package parse

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// A small, tolerant scanner for Python reprs: dataclass reprs
// (ServerArgs(...), GenerateReqInput(...)), dicts, lists, tuples, strings
// with escapes, None/True/False, numbers, <Enum.X: 1> reprs, and the
// truncated-string form 'head' ... 'tail' of --log-requests (§a1, §d).
//
// It never builds a tree: callers iterate the pairs they need and decode
// only those values, which keeps Receive/Finish lines cheap. It works on
// spans of the input string, tolerates unbalanced brackets (a record may be
// truncated) and never reads past the end of its input.

// pyScan returns the index of the first byte at or after i that is one of
// stops at bracket depth 0 outside strings, or the index of an unmatched
// closing bracket, or len(s).
func pyScan(s string, i int, stops string) int {
	end, _ := pyScanClamp(s, i, stops)
	return end
}

// pyScanClamp is pyScan that also reports whether it passed a '>' at depth
// 0 (which pyScan ignores, but a scan that started outside an enclosing
// bracket would have counted as its close).
func pyScanClamp(s string, i int, stops string) (end int, clamped bool) {
	depth := 0
	for i < len(s) {
		c := s[i]
		if !pySpecial[c] {
			i++
			continue
		}
		switch c {
		case '\'', '"':
			i = pySkipString(s, i)
			continue
		case '(', '[', '{':
			depth++
		case '<':
			// Object/enum reprs: <ForwardMode.EXTEND: 1>. Only when followed
			// by a letter, so comparisons in unquoted text do not nest.
			if i+1 < len(s) && isIdentStart(s[i+1]) {
				depth++
			}
		case ')', ']', '}':
			if depth == 0 {
				return i, clamped
			}
			depth--
		case '>':
			if depth > 0 {
				depth--
			} else {
				clamped = true
			}
		default: // ',' or ':'
			if depth == 0 && strings.IndexByte(stops, c) >= 0 {
				return i, clamped
			}
		}
		i++
	}
	return len(s), clamped
}

// pySpecial marks the bytes pyScan must look at; stops are limited to ','
// and ':'.
var pySpecial = [256]bool{'\'': true, '"': true, '(': true, '[': true, '{': true, '<': true,
	')': true, ']': true, '}': true, '>': true, ',': true, ':': true}

// pySkipString returns the index just past the quoted string starting at
// s[i] (a quote). An unterminated string runs to the end of s.
func pySkipString(s string, i int) int {
	q := s[i]
	i++
	for i < len(s) {
		j := strings.IndexByte(s[i:], q)
		if j < 0 {
			return len(s)
		}
		// The quote is escaped if preceded by an odd number of backslashes.
		k := i + j
		n := 0
		for k-1-n >= i && s[k-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return k + 1
		}
		i = k + 1
	}
	return len(s)
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdent(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') || c == '.' }

// pyKwargs iterates the pairs of a call body or top-level sequence
// "k1=v1, k2=v2, ...": s is the text between the parentheses. A positional
// item gets key "". fn returns false to stop.
func pyKwargs(s string, fn func(key, val string) bool) { pyKwargsStop(s, fn) }

// pyKwargsStop is pyKwargs that reports where it stopped: the index of the
// unmatched closer that ends the body, len(s) if it ran to the end, -1 if
// fn stopped it; and whether a scan of a value passed a '>' at depth 0
// (pyScanClamp).
func pyKwargsStop(s string, fn func(key, val string) bool) (stop int, clamped bool) {
	i := 0
	for i < len(s) {
		for i < len(s) && (s[i] == ' ' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return len(s), clamped
		}
		j := i
		for j < len(s) && isIdent(s[j]) {
			j++
		}
		key := ""
		if j > i && j < len(s) && s[j] == '=' && (j+1 >= len(s) || s[j+1] != '=') {
			key = s[i:j]
			i = j + 1
		}
		end, cl := pyScanClamp(s, i, ",")
		clamped = clamped || cl
		if !fn(key, strings.TrimSpace(s[i:end])) {
			return -1, clamped
		}
		if end >= len(s) || s[end] != ',' {
			return end, clamped // unmatched closer: end of the body
		}
		i = end + 1
	}
	return len(s), clamped
}

// pyDict iterates the items of a dict literal body (between the braces).
func pyDict(s string, fn func(key, val string) bool) {
	i := 0
	for i < len(s) {
		for i < len(s) && (s[i] == ' ' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return
		}
		kend := pyScan(s, i, ":,")
		if kend >= len(s) || s[kend] != ':' {
			return
		}
		vstart := kend + 1
		vend := pyScan(s, vstart, ",")
		if !fn(strings.TrimSpace(s[i:kend]), strings.TrimSpace(s[vstart:vend])) {
			return
		}
		if vend >= len(s) || s[vend] != ',' {
			return
		}
		i = vend + 1
	}
}

// pyBody returns the contents of a bracketed value: for "Name(...)",
// "{...}", "[...]" or "(...)" the text between the outer brackets, and the
// opening bracket. A truncated value (no closer) yields the rest.
func pyBody(v string) (body string, open byte, name string) {
	i := 0
	for i < len(v) && isIdent(v[i]) {
		i++
	}
	name = v[:i]
	if i >= len(v) {
		return "", 0, name
	}
	open = v[i]
	switch open {
	case '(', '[', '{':
	default:
		return "", 0, name
	}
	end := pyScan(v, i+1, "")
	return v[i+1 : end], open, name
}

// pyOpen is pyBody without the search for the closing bracket: it returns
// everything after the opening bracket. pyKwargs and pyDict stop at the
// first unmatched closer, which is where pyBody's body ends, so iterating
// pyOpen's rest gives the pairs of pyBody's body (pyKwargs may add a last
// pair ("", "") at the closer) while scanning the value once instead of
// twice. FuzzPythonRepr holds the two to the same pairs.
func pyOpen(v string) (rest string, open byte) {
	i := 0
	for i < len(v) && isIdent(v[i]) {
		i++
	}
	if i >= len(v) {
		return "", 0
	}
	switch open = v[i]; open {
	case '(', '[', '{':
		return v[i+1:], open
	}
	return "", 0
}

// pyString decodes a Python string literal, including adjacent literals
// and the truncation form 'head' ... 'tail' (joined with "..."). The
// second result is false if v is not a string.
func pyString(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if len(v) > 1 && (v[0] == 'b' || v[0] == 'r' || v[0] == 'u') && (v[1] == '\'' || v[1] == '"') {
		v = v[1:]
	}
	if v == "" || (v[0] != '\'' && v[0] != '"') {
		return "", false
	}
	end := pySkipString(v, 0)
	if end == len(v) && strings.IndexByte(v[1:], '\\') < 0 && len(v) >= 2 && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1], true // fast path: one literal, no escapes
	}
	var b strings.Builder
	pyUnescape(&b, v[:end])
	rest := strings.TrimSpace(v[end:])
	for len(rest) > 0 {
		if strings.HasPrefix(rest, "...") {
			b.WriteString("...")
			rest = strings.TrimSpace(rest[3:])
			continue
		}
		if rest[0] != '\'' && rest[0] != '"' {
			break
		}
		e := pySkipString(rest, 0)
		pyUnescape(&b, rest[:e])
		rest = strings.TrimSpace(rest[e:])
	}
	return b.String(), true
}

// pyUnescape writes the decoded contents of one quoted literal lit.
func pyUnescape(b *strings.Builder, lit string) {
	if len(lit) < 1 {
		return
	}
	q := lit[0]
	s := lit[1:]
	if len(s) > 0 && s[len(s)-1] == q {
		s = s[:len(s)-1]
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'x', 'u', 'U':
			n := 2
			if e == 'u' {
				n = 4
			} else if e == 'U' {
				n = 8
			}
			if i+1+n <= len(s) {
				if r, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32); err == nil && utf8.ValidRune(rune(r)) {
					b.WriteRune(rune(r))
					i += n
					continue
				}
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
}

// pyUint decodes a non-negative integer repr; None and anything else is
// (0, false).
func pyUint(v string) (uint64, bool) {
	v = strings.TrimSpace(v)
	// Not a number (None, a quoted string, …) is common here; ParseUint
	// would allocate its syntax error to say so, and return 0.
	if !digitsOnly(v) {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

func pyInt(v string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n, err == nil
}

func pyFloat(v string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	return f, err == nil
}

// pyFirst returns the first element of a list/tuple repr, or v itself. A
// batched request carries one rid/room per item (§e); kvtrail keys on the
// first.
func pyFirst(v string) string {
	if len(v) > 0 && (v[0] == '[' || v[0] == '(') {
		body, _, _ := pyBody(v)
		first := ""
		pyKwargs(body, func(_, val string) bool { first = val; return false })
		return first
	}
	return v
}

// pyText renders a value for storage: strings unquoted, the rest as logged.
func pyText(v string) string {
	if s, ok := pyString(v); ok {
		return s
	}
	return v
}

// digitsOnly reports whether s is a non-empty run of ASCII digits.
func digitsOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
