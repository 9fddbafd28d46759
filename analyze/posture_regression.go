package analyze

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/posture"
)

// PostureRegression raises a finding when a node boots worse than it did
// the time before (posture.Fleet.Regressions): its SGLang version went
// down, its KV pool fell below the context length or its limit shrank,
// deferred KV release was turned off, or a known bug of the cross-request
// KV class (posture/knownbugs.json) became exposed. This is the "read the
// startup log of every node after every change" check, run for the
// operator. Only boots that started inside the window are judged, so a
// live run raises it once, shortly after the boot.
type PostureRegression struct{}

// Name implements Analyzer.
func (*PostureRegression) Name() string { return "posture_regression" }

func init() {
	Register(Registration{Order: 100,
		New: func(Config) Analyzer {
			return &PostureRegression{}
		}})
}

// Version implements Analyzer.
func (*PostureRegression) Version() string { return "1" }

// Params implements Analyzer.
func (*PostureRegression) Params() any { return struct{}{} }

// Analyze implements Analyzer.
func (*PostureRegression) Analyze(ctx context.Context, d *Dataset) ([]Finding, error) {
	db, ok := d.DB.(posture.DB)
	if !ok {
		return nil, fmt.Errorf("posture: the store cannot read posture (%T)", d.DB)
	}
	fleet, err := posture.Load(ctx, db)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, r := range fleet.Regressions() {
		b := r.Boot
		if !d.Window.From.IsZero() && !d.Window.Contains(b.BootTS) {
			continue
		}
		sev := Low
		if len(r.NewBugs) > 0 {
			// A boot newly exposed to a bug that serves one tenant's KV
			// to another: notify before a customer is hit.
			sev = Medium
		}
		what := append([]string{}, r.Changes...)
		if len(r.NewBugs) > 0 {
			what = append(what, "newly exposed to "+strings.Join(r.NewBugs, ", "))
		}
		fd := Finding{
			Severity: sev, Confidence: 1, TS: b.BootTS, FirstTS: b.BootTS, LastTS: b.BootTS, DecodeDPRank: -1,
			GroupKey: "posture:" + r.Node,
			Title:    fmt.Sprintf("%s booted with a worse posture: %s", r.Node, strings.Join(what, "; ")),
			Explanation: fmt.Sprintf("%s booted %s (SGLang %s, KV pool %s, context %s, max_req_input_len %s, deferred release %s); "+
				"its previous boot %s had SGLang %s, KV pool %s, max_req_input_len %s, deferred release %s. What got worse: %s. "+
				"See kvtrail posture or the Fleet page for each bug's verdict and sources.",
				r.Node, fmtTime(b.BootTS), b.Version.Value, b.PoolTokens.Value, b.ContextLen.Value, b.MaxReqInputLen.Value, b.DeferredRelease.Value,
				fmtTime(r.Prev.BootTS), r.Prev.Version.Value, r.Prev.PoolTokens.Value, r.Prev.MaxReqInputLen.Value, r.Prev.DeferredRelease.Value,
				strings.Join(what, "; ")),
			Evidence: r.Evidence,
			Details: map[string]string{"node": r.Node, "role": b.Role, "boot_id": b.BootID, "previous_boot_id": r.Prev.BootID,
				"newly_exposed": strings.Join(r.NewBugs, ","), "sglang_version": b.Version.Value, "previous_sglang_version": r.Prev.Version.Value},
			Subject: "posture:" + r.Node + ":" + b.BootID + ":" + b.BootTS.Format(time.RFC3339Nano),
		}
		if b.Role == "decode" || b.PDMode.Value == "decode" {
			fd.DecodeNode = r.Node
		} else {
			fd.PrefillNode = r.Node
		}
		out = append(out, fd)
	}
	return out, nil
}

// newPass: the fleet's settings are read once per window, not per slice,
// and from the store alone, so Run reads them beside the slices.
func (a *PostureRegression) newPass() pass { return &earlyPass{run: a.Analyze} }
