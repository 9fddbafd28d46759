package analyze

import (
	"context"
	"fmt"
)

// TransferFailedOK finds rooms with a transfer or bootstrap failure line
// (§c4, §c5) whose client response was nevertheless a success with
// completion tokens: the decode side produced an answer without a
// complete transfer.
type TransferFailedOK struct{}

// Name implements Analyzer.
func (*TransferFailedOK) Name() string { return "transfer_failed_ok" }

func init() {
	Register(Registration{Order: 80,
		Victims: High,
		New: func(Config) Analyzer {
			return &TransferFailedOK{}
		}})
}

// Version implements Analyzer.
func (*TransferFailedOK) Version() string { return "1" }

// Params implements Analyzer.
func (*TransferFailedOK) Params() any { return struct{}{} }

// Analyze implements Analyzer.
func (*TransferFailedOK) Analyze(_ context.Context, d *Dataset) ([]Finding, error) {
	var out []Finding
	for _, f := range d.Facts {
		if f.Unified || !f.ClientSuccess() {
			continue
		}
		var fail *TransferEvent
		for _, t := range f.Transfer {
			if t.Failure() {
				fail = t
				break
			}
		}
		if fail == nil {
			continue
		}
		fd := f.Finding()
		fd.Severity, fd.Confidence = High, 0.8
		fd.Title = fmt.Sprintf("transfer failed on %s but the client got a success", fail.Node)
		fd.Explanation = fmt.Sprintf("%s logged %s for bootstrap_room %d at %s (%s); the client got %d with %s completion tokens.",
			fail.Node, fail.Event, f.Room, fmtTime(fail.TS), fail.Reason, f.Status(), commas(f.Completion()))
		fd.Details["transfer_event"] = fail.Event
		fd.Details["transfer_reason"] = fail.Reason
		out = append(out, fd)
	}
	return out, nil
}
