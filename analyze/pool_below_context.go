package analyze

import (
	"context"
	"fmt"
	"time"
)

// PoolBelowContext finds engine boots whose KV pool (and so the derived
// max_req_input_len, reference §a4) is below the context length the model
// is served with: during such a boot any prompt in [max_req_input_len,
// context_len] passes the tokenizer's context check (§c2) and reaches the
// scheduler's rejection path (§c1). On a PD prefill node that path ends in
// the 1-token placeholder being transferred and decode reading stale pages,
// so this is the check to run after every deployment change.
type PoolBelowContext struct{}

// Name implements Analyzer.
func (*PoolBelowContext) Name() string { return "pool_below_context" }

func init() {
	Register(Registration{Order: 10,
		New: func(Config) Analyzer {
			return &PoolBelowContext{}
		}})
}

// Version implements Analyzer.
func (*PoolBelowContext) Version() string { return "1" }

// Params implements Analyzer.
func (*PoolBelowContext) Params() any { return struct{}{} }

// Analyze implements Analyzer.
func (a *PoolBelowContext) Analyze(ctx context.Context, d *Dataset) ([]Finding, error) {
	return runPass(ctx, a.newPass(), d)
}

// gapHits counts, per boot, the prompts in its gap.
type gapHits struct {
	n, served int
	lines     []uint64
}

// poolPass counts prompts in each boot's gap over the slices and reports
// the boots at the end.
type poolPass struct{ hits map[*Boot]*gapHits }

func (*PoolBelowContext) newPass() pass { return &poolPass{hits: map[*Boot]*gapHits{}} }

// inGap reports whether a boot runs with a pool below its context length.
func inGap(b *Boot) bool { return b.HasLimits && b.MaxReqInputLen+6 < b.ContextLen }

func (p *poolPass) slice(_ context.Context, d *Dataset) ([]Finding, error) {
	for _, f := range d.Facts {
		if f.Prefill == nil || f.Prefill.Boot == nil || !inGap(f.Prefill.Boot) {
			continue
		}
		b := f.Prefill.Boot
		if pr := f.PromptTokens(); pr < b.Limit() || pr > b.ContextLen {
			continue
		}
		h := p.hits[b]
		if h == nil {
			h = &gapHits{}
			p.hits[b] = h
		}
		h.n++
		if f.ClientSuccess() {
			h.served++
		}
		if len(h.lines) < 20 && f.GW != nil {
			h.lines = append(h.lines, f.GW.Line)
		}
	}
	return nil, nil
}

func (p *poolPass) finish(_ context.Context, d *Dataset) ([]Finding, error) {
	var out []Finding
	for _, node := range d.Boots.Nodes() {
		for _, b := range d.Boots.ByNode[node] {
			if !inGap(b) {
				continue
			}
			end := b.End()
			if end.IsZero() || end.After(d.Window.To) {
				end = d.Window.To
			}
			start := b.At
			if start.Before(d.Window.From) {
				start = d.Window.From
			}
			if !end.After(start) {
				continue
			}
			var h gapHits
			if x := p.hits[b]; x != nil {
				h = *x
			}
			sev, conf := Medium, 0.95
			what := "a PD prefill node: a prompt in the gap is replaced by a 1-token placeholder, one page is transferred and decode reads stale pages for the rest (#30233)"
			switch {
			case b.Role == "unified" || b.Mode == "null":
				sev, what = Low, "a non-PD engine: such prompts get a 400 (correct behaviour), no cross-tenant risk"
			case b.Role == "decode" || b.Mode == "decode":
				sev, what = Low, "a decode node: such prompts fail decode preallocation (§c3)"
			}
			// The finding is about the boot, so its times are the boot's —
			// never the window's: a live round over the last minutes must
			// date a July boot in July.
			last := b.At
			if b.Next != nil {
				last = b.Next.At
			}
			fd := Finding{
				Severity: sev, Confidence: conf, TS: b.At, FirstTS: b.At, LastTS: last, DecodeDPRank: -1,
				GroupKey: "boot:" + node + ":" + b.ID,
				Title:    fmt.Sprintf("%s: KV pool below context length (max_req_input_len %s < context %s)", node, commas(b.MaxReqInputLen), commas(b.ContextLen)),
				Explanation: fmt.Sprintf("%s booted %s with max_total_num_tokens %s, so max_req_input_len = min(context_len-1, pool-1)-5 = %s, below context_len %s. "+
					"From %s to %s any prompt of %s..%s tokens hits the scheduler's rejection path on %s. "+
					"Prompts in that range seen on this boot in the window: %d (%d answered with completion tokens).",
					node, fmtTime(b.At), commas(b.MaxTotalTokens), commas(b.MaxReqInputLen), commas(b.ContextLen),
					fmtTime(b.At), endText(b), commas(b.MaxReqInputLen), commas(b.ContextLen), what, h.n, h.served),
				Evidence: append(append([]uint64{}, b.Lines...), h.lines...),
				Details: map[string]string{"node": node, "role": b.Role, "boot_id": b.ID, "max_req_input_len": itoa(b.MaxReqInputLen),
					"context_len": itoa(b.ContextLen), "max_total_num_tokens": itoa(b.MaxTotalTokens), "prompts_in_gap": fmt.Sprint(h.n),
					"served_in_gap": fmt.Sprint(h.served)},
				Subject: "boot:" + node + ":" + b.ID + ":" + b.At.Format(time.RFC3339Nano),
			}
			if b.Role == "prefill" {
				fd.PrefillNode = node
			} else {
				fd.DecodeNode = node
			}
			out = append(out, fd)
		}
	}
	return out, nil
}

func endText(b *Boot) string {
	if b.Next == nil {
		return "the end of the data (still in force)"
	}
	return fmtTime(b.Next.At) + " (next boot)"
}
