package parse

import (
	"strings"
)

// SGLangParser parses SGLang engine logs: scheduler, tokenizer and HTTP
// processes, --log-requests in text and JSON form (reference §0–§d).
type SGLangParser struct {
	opts  ParseOptions
	arena arena
}

// maxGlued bounds how many glued messages one record is split into.
const maxGlued = 16

// Parse parses one record. Only the first line of a multi-line record (a
// message plus its traceback) is interpreted; the rest stays in the raw
// record.
func (p *SGLangParser) Parse(rec Record) Parsed {
	line := bytesView(rec.Raw) // read in place (see Parser)
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		first := strings.TrimSuffix(line[:i], "\r")
		switch t := strings.TrimSpace(first); {
		case strings.Contains(first, "server_args=ServerArgs(") && !strings.HasSuffix(t, ")"):
			// A dump wrapped over lines (terminal or collector line limit):
			// the pieces join without separator.
			line = strings.NewReplacer("\r\n", "", "\n", "").Replace(line)
		case t == "{" || t == "[":
			line = strings.NewReplacer("\r\n", " ", "\n", " ").Replace(line) // a pretty-printed JSON body
		default:
			line = first
		}
	}
	out := p.ParseLine(line)
	if rec.Truncated && out.Status == StatusUnknown {
		out.Reason = "record truncated"
	}
	return out
}

// ParseLine parses one SGLang line.
func (p *SGLangParser) ParseLine(line string) Parsed {
	return p.parseLine(line, 0)
}

func (p *SGLangParser) parseLine(line string, depth int) Parsed {
	pre := parsePrefix(line, p.opts.loc())
	msg := pre.msg
	// Lines glued without a newline (§a4 note): split at a second SGLang
	// prefix, unless the message is a request log or server_args dump whose
	// quoted payload may contain anything.
	if depth < maxGlued && !isOpaqueMessage(msg) {
		if k := gluedPrefix(msg, p.opts); k > 0 {
			first := p.message(msg[:k], pre.ranks)
			first.TS = p.opts.fix(pre.ts)
			rest := p.parseLine(msg[k:], depth+1)
			return combine(first, rest)
		}
	}
	out := p.message(msg, pre.ranks)
	if !pre.ts.IsZero() {
		out.TS = p.opts.fix(pre.ts)
	}
	if out.Boot != nil {
		out.Boot.BootTS = out.TS
	}
	return out
}

// combine makes the first parsed message the primary result and keeps the
// others in More.
func combine(a, b Parsed) Parsed {
	all := append([]Parsed{a, b}, b.More...)
	all[1].More = nil
	prim := 0
	for i, x := range all {
		if x.Status == StatusParsed {
			prim = i
			break
		}
	}
	out := all[prim]
	for i, x := range all {
		if i != prim && x.Status != StatusUnknown {
			out.More = append(out.More, x)
		}
	}
	return out
}

func isOpaqueMessage(msg string) bool {
	return strings.HasPrefix(msg, "Receive") || strings.HasPrefix(msg, "Finish: ") ||
		strings.HasPrefix(msg, "{") || strings.Contains(msg, "server_args=ServerArgs(")
}

// gluedPrefix returns the index of a second "[YYYY-mm-dd HH:MM:SS…]"
// prefix inside msg, or -1.
func gluedPrefix(msg string, opts ParseOptions) int {
	for from := 1; from < len(msg); {
		k := strings.Index(msg[from:], "[20")
		if k < 0 {
			return -1
		}
		k += from
		if pp := parsePrefix(msg[k:], opts.loc()); !pp.ts.IsZero() {
			return k
		}
		from = k + 1
	}
	return -1
}

// message dispatches on the message text. Cheap prefix checks come first
// (batch and request lines are the bulk of a log); then known messages are
// searched for anywhere in the line, because user logging configs and
// glued lines put arbitrary text in front of them (§0, §a4).
func (p *SGLangParser) message(msg string, ranks Ranks) Parsed {
	switch {
	case strings.HasPrefix(msg, "Prefill batch") || strings.HasPrefix(msg, "Decode batch"):
		if out, ok := parseBatch(&p.arena, msg, ranks); ok {
			return out
		}
	case strings.HasPrefix(msg, "Receive: ") || strings.HasPrefix(msg, "Receive OpenAI: ") || strings.HasPrefix(msg, "Finish: "):
		return parseRequestText(&p.arena, msg, ranks)
	case strings.HasPrefix(msg, "{") || strings.HasPrefix(msg, "["):
		if strings.Contains(msg, `"event": "request.`) || strings.Contains(msg, `"event":"request.`) {
			if out, ok := parseRequestJSONFast(&p.arena, msg, ranks, p.opts); ok {
				return out
			}
			return parseRequestJSON(msg, ranks, p.opts)
		}
		if strings.Contains(msg, `"meta_info"`) {
			return parseGenerateResponse(msg, ranks)
		}
	case strings.HasPrefix(msg, "INFO:"):
		if out, ok := parseUvicorn(&p.arena, msg, ranks); ok {
			return out
		}
	}
	if out, ok := parseBootLine(msg, ranks); ok {
		return out
	}
	if out, ok := parseRejection(msg, ranks); ok {
		return out
	}
	if out, ok := parseTransferFailure(msg, ranks); ok {
		return out
	}
	// Batch lines behind a user logging prefix.
	for _, k := range [...]string{"Prefill batch", "Decode batch"} {
		if i := strings.Index(msg, k); i > 0 {
			if out, ok := parseBatch(&p.arena, msg[i:], ranks); ok {
				return out
			}
		}
	}
	for _, k := range [...]string{"Receive: obj=", "Receive OpenAI: obj=", "Finish: obj="} {
		if i := strings.Index(msg, k); i > 0 {
			return parseRequestText(&p.arena, msg[i:], ranks)
		}
	}
	return unknown("")
}
