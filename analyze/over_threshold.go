package analyze

import (
	"context"
	"fmt"
)

// OverThreshold finds requests whose prompt was at or above the
// max_req_input_len of the prefill boot that served them (limits change
// across boots, so the boot in force at the request's time is used) but
// within the context length, i.e. prompts that took the scheduler's
// rejection path (§c1). In PD mode a success with completion tokens means
// the client was answered from pages the prefill never wrote: HIGH.
type OverThreshold struct{}

// Name implements Analyzer.
func (*OverThreshold) Name() string { return "over_threshold" }

func init() {
	Register(Registration{Order: 20,
		Victims: High,
		New: func(Config) Analyzer {
			return &OverThreshold{}
		}})
}

// Version implements Analyzer.
func (*OverThreshold) Version() string { return "1" }

// Params implements Analyzer.
func (*OverThreshold) Params() any { return struct{}{} }

// Analyze implements Analyzer.
func (*OverThreshold) Analyze(_ context.Context, d *Dataset) ([]Finding, error) {
	var out []Finding
	for _, f := range d.Facts {
		p := f.Prefill
		if p == nil || p.Boot == nil || !p.Boot.HasLimits {
			continue
		}
		b := p.Boot
		prompt := f.PromptTokens()
		if prompt < b.Limit() || prompt > b.ContextLen || b.AutoTruncate {
			continue
		}
		fd := f.Finding()
		rejected, how := f.PrefillRejected()
		pd := !f.Unified && b.Role == "prefill"
		switch {
		case pd && f.ClientSuccess():
			fd.Severity, fd.Confidence = High, 0.85
			if rejected {
				fd.Confidence = 0.97
			}
		case pd:
			fd.Severity, fd.Confidence = Low, 0.8
		default:
			fd.Severity, fd.Confidence = Note, 0.9
		}
		fd.Title = fmt.Sprintf("prompt %s tokens >= %s's max_req_input_len %s", commas(prompt), p.Node, commas(b.Limit()))
		outcome := fmt.Sprintf("client got %d", f.Status())
		if f.GW != nil {
			outcome += fmt.Sprintf(" with %s completion tokens and TTFT %.0f ms", commas(f.GW.Completion), f.GW.TTFTMs)
		}
		pre := ""
		if rejected {
			pre = "; prefill evidence: " + how
		}
		fd.Explanation = fmt.Sprintf("prompt %s tokens >= %s's max_req_input_len %s (boot %s, pool %s < context %s)%s; %s.",
			commas(prompt), p.Node, commas(b.Limit()), fmtTime(b.At), commas(b.MaxTotalTokens), commas(b.ContextLen), pre, outcome)
		if !pd {
			fd.Explanation += " Non-PD engine: the rejection reaches the client, no cross-tenant data."
		}
		fd.Evidence = append(fd.Evidence, b.Lines...)
		fd.GroupKey = "boot:" + p.Node + ":" + b.ID
		fd.Details["prompt_tokens"] = itoa(prompt)
		fd.Details["max_req_input_len"] = itoa(b.Limit())
		fd.Details["context_len"] = itoa(b.ContextLen)
		out = append(out, fd)
	}
	return out, nil
}
