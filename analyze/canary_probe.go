package analyze

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// CanaryProbe turns the canary prober's verdicts (table probes, written by
// `kvtrail probe` and by serve with probes.enabled) into findings, so they
// are listed, counted and alerted like every other finding:
//   - leak: a probe's answer carried another probe's marker. Markers are
//     random 64-bit codes sent once, so this is proof that one request's
//     data reached another's answer; both requests are the evidence.
//   - over_limit_served: a prompt placed just above a node's rejection
//     threshold (posture) was answered 200, where a 4xx belongs.
type CanaryProbe struct{}

// Name implements Analyzer.
func (*CanaryProbe) Name() string { return "canary_probe" }

func init() {
	Register(Registration{Order: 110,
		New: func(Config) Analyzer {
			return &CanaryProbe{}
		}})
}

// Version implements Analyzer.
func (*CanaryProbe) Version() string { return "1" }

// Params implements Analyzer.
func (*CanaryProbe) Params() any { return struct{}{} }

// Analyze implements Analyzer.
func (*CanaryProbe) Analyze(ctx context.Context, d *Dataset) ([]Finding, error) {
	from, to := time.Time{}, time.Unix(0xffffffff, 0) // no window: every probe on record
	if !d.Window.From.IsZero() {
		from, to = d.Window.From, d.Window.To
	}
	list, err := d.DB.ProbeVerdicts(ctx, from, to)
	if err != nil {
		return nil, err
	}
	var markers []string
	for _, p := range list {
		markers = append(markers, p.ForeignMarkers...)
	}
	owners, err := d.DB.ProbeMarkers(ctx, markers)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, p := range list {
		ts := p.TS
		f := Finding{Severity: High, TS: ts, FirstTS: ts, LastTS: ts, DecodeDPRank: -1, RequestKey: "probe:" + p.ID,
			Subject: "probe:" + p.ID,
			Details: map[string]string{"probe_id": p.ID, "identity": p.Identity, "endpoint": p.Endpoint, "kind": p.Kind,
				"marker": p.Marker, "http_status": fmt.Sprint(p.HTTPStatus), "prompt_tokens": itoa(p.Prompt),
				"completion_tokens": itoa(p.Completion), "stream": fmt.Sprint(p.Stream), "answer": p.Answer}}
		switch p.Verdict {
		case domain.VerdictLeak:
			f.Confidence = 1
			var who []string
			crossTenant := false
			for i, m := range p.ForeignMarkers {
				o, ok := owners[m]
				if !ok {
					who = append(who, m+" (sent by no probe on record)")
					continue
				}
				f.ForeignRequestKeys = append(f.ForeignRequestKeys, "probe:"+o.ProbeID)
				if o.Identity != p.Identity {
					crossTenant = true
				}
				who = append(who, fmt.Sprintf("%s from probe %s (identity %s, %s, sent %s)", m, o.ProbeID, o.Identity, o.Kind,
					fmtTime(o.TS)))
				f.Details[fmt.Sprintf("foreign_%d_probe_id", i)] = o.ProbeID
				f.Details[fmt.Sprintf("foreign_%d_identity", i)] = o.Identity
			}
			scope := "another request of the same identity"
			if crossTenant {
				scope = "another identity (tenant)"
			}
			f.GroupKey = "probe:leak:" + p.Endpoint
			f.Title = fmt.Sprintf("Canary probe %s (identity %s) received %s's marker", p.ID, p.Identity, scope)
			f.Explanation = fmt.Sprintf("Probe %s (%s, identity %s) asked for its own marker %s and got HTTP %d with an answer carrying %s. "+
				"Markers are random and sent once, so data of one request reached another request's answer. Answer (cut): %q",
				p.ID, p.Kind, p.Identity, p.Marker, p.HTTPStatus, strings.Join(who, "; "), p.Answer)
		case domain.VerdictOverLimitServed:
			f.Confidence = 0.9
			f.PrefillNode = p.ThresholdNode
			f.GroupKey = "probe:over_limit:" + p.ThresholdNode
			f.Title = fmt.Sprintf("Over-limit canary prompt answered %d by the endpoint (threshold %s tokens of %s)", p.HTTPStatus, commas(p.ThresholdTokens), p.ThresholdNode)
			f.Explanation = fmt.Sprintf("Probe %s (identity %s) sent a prompt sized just above %s's rejection threshold of %s tokens "+
				"(max_req_input_len from its boot lines); a 4xx belongs there, the endpoint answered %d with %d completion tokens "+
				"(reported prompt_tokens %d). This is the #30233 path: the prompt was rejected by the prefill scheduler and served by decode from pages it never received.",
				p.ID, p.Identity, p.ThresholdNode, commas(p.ThresholdTokens), p.HTTPStatus, p.Completion, p.Prompt)
		}
		out = append(out, f)
	}
	return out, nil
}

// newPass: probe verdicts are read once per window, not per slice.
func (a *CanaryProbe) newPass() pass { return windowPass(a.Analyze) }
