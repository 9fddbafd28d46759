package parse

import (
	"strings"
	"time"
)

// linePrefix is what precedes the message of an SGLang line (§0).
type linePrefix struct {
	ts    time.Time
	ranks Ranks
	level string // only in user logging-config forms
	msg   string // the message after the prefix
}

// parseDateTime reads "YYYY-mm-dd HH:MM:SS" (or with 'T') plus optional
// fractional seconds ".ddd"/",ddd" at s[0:], returning the time in loc and
// the index after it. It does not allocate.
func parseDateTime(s string, loc *time.Location) (time.Time, int, bool) {
	if loc == nil {
		loc = time.UTC
	}
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, 0, false
	}
	y, ok1 := atoiN(s[0:4])
	mo, ok2 := atoiN(s[5:7])
	d, ok3 := atoiN(s[8:10])
	h, ok4 := atoiN(s[11:13])
	mi, ok5 := atoiN(s[14:16])
	sec, ok6 := atoiN(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 {
		return time.Time{}, 0, false
	}
	i := 19
	ns := 0
	if i < len(s) && (s[i] == '.' || s[i] == ',') {
		j := i + 1
		scale := 100000000
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			ns += int(s[j]-'0') * scale
			scale /= 10
			j++
		}
		if j > i+1 {
			i = j
		}
	}
	// An explicit zone (ISO forms of JSON/tracing logs) overrides loc.
	if i < len(s) && s[i] == 'Z' {
		return time.Date(y, time.Month(mo), d, h, mi, sec, ns, time.UTC), i + 1, true
	}
	return time.Date(y, time.Month(mo), d, h, mi, sec, ns, loc), i, true
}

func atoiN(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, len(s) > 0
}

// parseRanks fills ranks from the space-separated rank tokens of a prefix
// ("DP0 PP1 TP3 EP3"). Tokens are a set: the order changed in v0.4.10,
// v0.5.6 and v0.5.9 (§0 table). It reports false on a token that is not a
// rank, which means the bracket is not a scheduler prefix.
func parseRanks(s string, r *Ranks) bool {
	for len(s) > 0 {
		for len(s) > 0 && s[0] == ' ' {
			s = s[1:]
		}
		if s == "" {
			break
		}
		tok := s
		if i := strings.IndexByte(s, ' '); i >= 0 {
			tok, s = s[:i], s[i:]
		} else {
			s = ""
		}
		name := tok
		j := len(tok)
		for j > 0 && tok[j-1] >= '0' && tok[j-1] <= '9' {
			j--
		}
		if j == len(tok) || len(tok)-j > 4 {
			return false
		}
		name = tok[:j]
		n, _ := atoiN(tok[j:])
		v := int16(n)
		switch name {
		case "DP":
			r.DP = v
		case "PP":
			r.PP = v
		case "TP":
			r.TP = v
		case "EP":
			r.EP = v
		case "ATTN_CP":
			r.AttnCP = v
		case "MOE_DP":
			r.MoeDP = v
		case "CP":
			r.CP = v
		default:
			return false
		}
	}
	return true
}

// parsePrefix splits an SGLang line into prefix and message. Recognised:
//
//	[2026-08-20 10:11:12 DP3 TP3 EP3] msg            (§0 default format)
//	[2026-08-20 10:11:12.345] msg                    (SGLANG_LOG_MS, ≥ v0.5.6)
//	[2026-04-15 17:13:10][file.py:424][INFO]: msg    (user dictConfig, #22877)
//	2026-04-15 17:13:10,123 INFO logger.func: msg    (other user formats)
//
// Without a recognisable prefix the whole line is the message and ts is
// zero. Known messages are searched for anywhere in msg anyway.
func parsePrefix(line string, loc *time.Location) linePrefix {
	p := linePrefix{ranks: NoRanks, msg: line}
	if len(line) > 20 && line[0] == '[' {
		ts, i, ok := parseDateTime(line[1:], loc)
		if !ok {
			// "[ TP2] msg": a rank prefix whose time was cut off.
			if end := strings.IndexByte(line, ']'); end > 2 && end < 40 {
				r := NoRanks
				if tok := strings.TrimSpace(line[1:end]); tok != "" && parseRanks(tok, &r) {
					p.ranks, p.msg = r, strings.TrimPrefix(line[end+1:], " ")
				}
			}
			return p
		}
		i++ // index in line
		end := strings.IndexByte(line[i:], ']')
		if end < 0 {
			return p
		}
		end += i
		var r Ranks = NoRanks
		if !parseRanks(line[i:end], &r) {
			return p
		}
		p.ts, p.ranks = ts, r
		rest := line[end+1:]
		// dictConfig forms: more bracket groups, then ": ".
		for len(rest) > 0 && rest[0] == '[' {
			e := strings.IndexByte(rest, ']')
			if e < 0 {
				break
			}
			grp := rest[1:e]
			switch grp {
			case "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL":
				p.level = grp
			}
			rest = rest[e+1:]
		}
		rest = strings.TrimPrefix(rest, ":")
		p.msg = strings.TrimPrefix(rest, " ")
		return p
	}
	if len(line) >= 19 && line[0] >= '0' && line[0] <= '9' {
		if ts, i, ok := parseDateTime(line, loc); ok {
			p.ts = ts
			p.msg = strings.TrimLeft(line[i:], " ")
		}
	}
	return p
}
