package analyze

import (
	"context"
	"fmt"
)

// RejectedServed finds PD requests the prefill side rejected or aborted
// (rejection line, abort finish, or a Finish with prompt_tokens=1 while the
// client sent more: the §c1 placeholder) while the gateway or decode side
// reports a normal completion. The transfer that "succeeded" carried one
// page; decode answered from whatever its reserved pages last held (§c7:
// FINISH_LENGTH(0) overwrote the pending abort).
type RejectedServed struct{}

// Name implements Analyzer.
func (*RejectedServed) Name() string { return "rejected_served" }

func init() {
	Register(Registration{Order: 30,
		Victims: High,
		New: func(Config) Analyzer {
			return &RejectedServed{}
		}})
}

// Version implements Analyzer.
func (*RejectedServed) Version() string { return "1" }

// Params implements Analyzer.
func (*RejectedServed) Params() any { return struct{}{} }

// Analyze implements Analyzer.
func (*RejectedServed) Analyze(_ context.Context, d *Dataset) ([]Finding, error) {
	var out []Finding
	for _, f := range d.Facts {
		if f.Unified || f.Prefill == nil {
			continue
		}
		rejected, how := f.PrefillRejected()
		if !rejected {
			continue
		}
		// An abort on both sides (client abort, timeout) is consistent.
		decodeOK := f.Decode.Served() && f.Decode.Fin.Completion > 0
		if !f.ClientSuccess() && !decodeOK {
			continue
		}
		fd := f.Finding()
		fd.Severity, fd.Confidence = High, 0.9
		if f.Prefill.Rejected != nil {
			fd.Confidence = 0.97
		}
		served := "decode finished normally"
		if f.Decode != nil && f.Decode.Fin != nil {
			served = fmt.Sprintf("decode %s finished (%s) with prompt %s and %s completion tokens", f.Decode.Node,
				f.Decode.Fin.FinishType, commas(f.Decode.Fin.Prompt), commas(f.Decode.Fin.Completion))
		}
		client := "no gateway line"
		if f.GW != nil {
			client = fmt.Sprintf("client got %d with %s completion tokens (TTFT %.0f ms)", f.GW.Status, commas(f.GW.Completion), f.GW.TTFTMs)
		}
		fd.Title = fmt.Sprintf("prefill %s rejected the request but it was served", f.Prefill.Node)
		fd.Explanation = fmt.Sprintf("prefill %s: %s (prefill prompt_tokens %s, client prompt %s); %s; %s.",
			f.Prefill.Node, how, commas(f.Prefill.Prompt()), commas(f.PromptTokens()), served, client)
		fd.Details["prefill_evidence"] = how
		out = append(out, fd)
	}
	return out, nil
}
