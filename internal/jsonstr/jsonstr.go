// Package jsonstr decodes the contents of JSON string literals. One decoder
// serves two readers with different needs: ingest/parse must read a string
// exactly as encoding/json does (its fast path is checked against
// encoding/json), and ingest/push must keep a log line's invalid UTF-8 as it
// came, where encoding/json would replace it and alter the evidence.
package jsonstr

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Unquote decodes s, the contents of a JSON string literal between its
// quotes. Escapes are decoded as encoding/json decodes them; a UTF-16
// surrogate pair becomes one rune, and a lone half becomes U+FFFD (the
// escape after it is then decoded on its own).
//
// Bytes outside escapes are copied verbatim when keepInvalidUTF8 is set, so
// invalid UTF-8 survives. Otherwise each byte of invalid UTF-8 becomes
// U+FFFD, as in encoding/json.
//
// ok is false when an escape is malformed: a backslash at the end, an
// unknown escape, or \u without four hex digits. Unquote does not check
// for what else makes a literal invalid (an unescaped quote or control
// character): s is meant to come from a literal already validated by
// encoding/json or a scanner.
//
// When s has no escape (and, unless keepInvalidUTF8, is valid UTF-8), s
// itself is returned, without a copy: the common case on the ingest path.
func Unquote(s string, keepInvalidUTF8 bool) (string, bool) {
	// r is the length of the start of s that decodes to itself: up to the
	// first backslash and, unless keepInvalidUTF8, the first byte of
	// invalid UTF-8. (Written out here, not in a function, as a call
	// would cost the hot path.)
	r := 0
	if keepInvalidUTF8 {
		r = strings.IndexByte(s, '\\')
		if r < 0 {
			return s, true
		}
	} else {
		for r < len(s) {
			c := s[r]
			if c == '\\' {
				break
			}
			if c < utf8.RuneSelf {
				r++
				continue
			}
			rr, size := utf8.DecodeRuneInString(s[r:])
			if rr == utf8.RuneError && size == 1 {
				break
			}
			r += size
		}
		if r == len(s) {
			return s, true
		}
	}
	// Escapes only shrink; the slack covers a few invalid bytes growing to
	// U+FFFD (3 bytes) when they are replaced. strings.Builder hands out
	// its buffer as the string, so the decoded string is one allocation.
	var b strings.Builder
	if keepInvalidUTF8 {
		b.Grow(len(s))
	} else {
		b.Grow(len(s) + 2*utf8.UTFMax)
	}
	b.WriteString(s[:r])
	for r < len(s) {
		c := s[r]
		switch {
		case c == '\\':
			if r+1 == len(s) {
				return "", false
			}
			switch e := s[r+1]; e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				rr, ok := Hex4(s[r+2:])
				if !ok {
					return "", false
				}
				r += 6
				if utf16.IsSurrogate(rr) {
					// A valid pair is joined; anything else is U+FFFD, as
					// in encoding/json, and the next escape is read alone.
					if len(s) >= r+6 && s[r] == '\\' && s[r+1] == 'u' {
						if rr2, ok := Hex4(s[r+2:]); ok {
							if d := utf16.DecodeRune(rr, rr2); d != utf8.RuneError {
								b.WriteRune(d)
								r += 6
								continue
							}
						}
					}
					rr = utf8.RuneError
				}
				b.WriteRune(rr)
				continue
			default:
				return "", false
			}
			r += 2
		case keepInvalidUTF8:
			// Copy up to the next escape as it is.
			n := strings.IndexByte(s[r:], '\\')
			if n < 0 {
				n = len(s) - r
			}
			b.WriteString(s[r : r+n])
			r += n
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			r++
		default:
			rr, size := utf8.DecodeRuneInString(s[r:]) // U+FFFD, 1 for a bad byte
			b.WriteRune(rr)
			r += size
		}
	}
	return b.String(), true
}

// Hex4 decodes the four hex digits at the start of s (the digits of a \u
// escape); ok is false when s does not start with four hex digits.
func Hex4(s string) (r rune, ok bool) {
	if len(s) < 4 {
		return 0, false
	}
	for _, c := range []byte(s[:4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}
