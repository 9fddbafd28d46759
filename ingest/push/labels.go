package push

import (
	"fmt"
	"strconv"
)

// parseLabels parses a stream selector such as {job="x", node="y"}, the
// form in which protobuf pushes carry stream labels (clients produce it with
// Prometheus' LabelSet.String, i.e. Go %q quoting). Names may be bare
// identifiers or quoted (Prometheus 3 UTF-8 names); values are "…"
// (Go/PromQL escapes) or `…` (raw). A trailing comma is tolerated. Errors
// name offsets, never label text; callers wrap them with ErrBadRequest.
func parseLabels(s string) (map[string]string, error) {
	p := labelParser{s: s}
	p.space()
	if !p.eat('{') {
		return nil, p.errorf("expected '{'")
	}
	out := map[string]string{}
	for {
		p.space()
		if p.eat('}') {
			break
		}
		name, err := p.name()
		if err != nil {
			return nil, err
		}
		p.space()
		if !p.eat('=') {
			return nil, p.errorf("expected '='")
		}
		p.space()
		value, err := p.quoted()
		if err != nil {
			return nil, err
		}
		if _, dup := out[name]; dup {
			return nil, p.errorf("duplicate label name")
		}
		out[name] = value
		p.space()
		if p.eat(',') {
			continue
		}
		if !p.eat('}') {
			return nil, p.errorf("expected ',' or '}'")
		}
		break
	}
	p.space()
	if p.i != len(p.s) {
		return nil, p.errorf("trailing data")
	}
	return out, nil
}

type labelParser struct {
	s string
	i int
}

func (p *labelParser) errorf(format string, args ...any) error {
	return fmt.Errorf("stream labels: %s at offset %d", fmt.Sprintf(format, args...), p.i)
}

func (p *labelParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *labelParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *labelParser) name() (string, error) {
	if p.i < len(p.s) && (p.s[p.i] == '"' || p.s[p.i] == '`') {
		n, err := p.quoted()
		if err == nil && n == "" {
			return "", p.errorf("empty label name")
		}
		return n, err
	}
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (p.i > start && c >= '0' && c <= '9') {
			p.i++
			continue
		}
		break
	}
	if p.i == start {
		return "", p.errorf("expected label name")
	}
	return p.s[start:p.i], nil
}

// quoted reads a "…" or `…` literal starting at p.i.
func (p *labelParser) quoted() (string, error) {
	if p.i >= len(p.s) {
		return "", p.errorf("expected quoted value")
	}
	q := p.s[p.i]
	if q != '"' && q != '`' {
		return "", p.errorf("expected quoted value")
	}
	start := p.i
	for j := start + 1; j < len(p.s); j++ {
		switch p.s[j] {
		case '\\':
			if q == '"' {
				j++ // skip the escaped byte, which may be a quote
			}
		case q:
			v, err := strconv.Unquote(p.s[start : j+1])
			if err != nil {
				return "", p.errorf("invalid escape in quoted string")
			}
			p.i = j + 1
			return v, nil
		}
	}
	return "", p.errorf("unterminated quoted string")
}
