package analyze

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The state the stateful passes carry from a worker's slice to the worker
// that finishes the job (worker.go): plain values, never pointers — a boot
// by node, id and time; a request by key, linked again on absorb.

type poolState struct {
	Node, Boot string
	At         time.Time
	N, Served  int
	Lines      []uint64
}

func (p *poolPass) state() (string, error) {
	var st []poolState
	for b, h := range p.hits {
		st = append(st, poolState{Node: b.Node, Boot: b.ID, At: b.At, N: h.n, Served: h.served, Lines: h.lines})
	}
	return marshalState(st)
}

func (p *poolPass) absorb(_ context.Context, wd *Dataset, state string) error {
	var st []poolState
	if err := json.Unmarshal([]byte(state), &st); err != nil {
		return fmt.Errorf("pool state: %w", err)
	}
	for _, s := range st {
		var boot *Boot
		for _, b := range wd.Boots.ByNode[s.Node] {
			if b.ID == s.Boot && b.At.Equal(s.At) {
				boot = b
			}
		}
		if boot == nil {
			return fmt.Errorf("pool state: boot %s of %s at %s unknown", s.Boot, s.Node, s.At)
		}
		h := p.hits[boot]
		if h == nil {
			h = &gapHits{}
			p.hits[boot] = h
		}
		h.n += s.N
		h.served += s.Served
		for _, l := range s.Lines {
			if len(h.lines) < 20 {
				h.lines = append(h.lines, l)
			}
		}
	}
	return nil
}

type unloggedState struct {
	Routed map[string]int
	Span   map[string][2]time.Time
}

func (p *unloggedPass) state() (string, error) {
	return marshalState(unloggedState{Routed: p.routed, Span: p.span})
}

func (p *unloggedPass) absorb(_ context.Context, _ *Dataset, state string) error {
	var st unloggedState
	if err := json.Unmarshal([]byte(state), &st); err != nil {
		return fmt.Errorf("unlogged state: %w", err)
	}
	for k, n := range st.Routed {
		p.routed[k] += n
		sp, in := p.span[k], st.Span[k]
		if sp[0].IsZero() || in[0].Before(sp[0]) {
			sp[0] = in[0]
		}
		if in[1].After(sp[1]) {
			sp[1] = in[1]
		}
		p.span[k] = sp
	}
	return nil
}

type abortState struct {
	T     TransferEvent
	Src   string
	Rank  int16
	Cands []string
}

func (p *abortPass) state() (string, error) {
	st := make([]abortState, 0, p.cases.n)
	err := p.cases.each(func(c abortCase) error {
		s := abortState{T: *c.t, Src: c.src.key, Rank: c.rank}
		for _, v := range c.cands {
			s.Cands = append(s.Cands, v.key)
		}
		st = append(st, s)
		return nil
	})
	if err != nil {
		return "", err
	}
	return marshalState(st)
}

func (p *abortPass) absorb(ctx context.Context, wd *Dataset, state string) error {
	var st []abortState
	if err := json.Unmarshal([]byte(state), &st); err != nil {
		return fmt.Errorf("abort state: %w", err)
	}
	var keys []string
	for _, s := range st {
		keys = append(keys, s.Src)
		keys = append(keys, s.Cands...)
	}
	if err := wd.ensureFacts(ctx, keys); err != nil {
		return err
	}
	for _, s := range st {
		t := s.T
		src := wd.ByKey[s.Src]
		if src == nil {
			return fmt.Errorf("abort state: aborted request %s cannot be linked again", s.Src)
		}
		cands := make([]*Fact, 0, len(s.Cands))
		for _, k := range s.Cands {
			v := wd.ByKey[k]
			if v == nil {
				return fmt.Errorf("abort state: candidate %s cannot be linked again", k)
			}
			cands = append(cands, v)
		}
		c := newAbortCase(&t, src, s.Rank, cands)
		if err := p.cases.add(&c); err != nil {
			return err
		}
	}
	return nil
}

func marshalState(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode pass state: %w", err)
	}
	return string(b), nil
}
