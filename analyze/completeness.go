package analyze

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// Gap is a span during which a node logged nothing while the rest of the
// fleet did: the one gap rule (domain.FindSilences), which the store
// applies for the completeness analyzer and the UI's overview alike
// (Evidence.Silences).
type Gap = domain.Silence

// markCompleteness records on each finding whether the evidence of its
// nodes was complete over its time span.
func markCompleteness(d *Dataset, fs []Finding) {
	for i := range fs {
		f := &fs[i]
		if f.Details == nil {
			f.Details = map[string]string{}
		}
		complete := true
		for _, g := range d.Gaps {
			if (g.Node == f.PrefillNode || g.Node == f.DecodeNode) && g.From.Before(f.LastTS.Add(time.Minute)) && g.To.After(f.FirstTS.Add(-time.Minute)) {
				complete = false
			}
		}
		f.Details["evidence_complete"] = fmt.Sprint(complete)
	}
}

// Completeness reports the gaps, and nodes the gateway routed to that
// logged nothing at all, so every conclusion can say whether its evidence
// was complete.
type Completeness struct {
	GapThreshold time.Duration `json:"gap_threshold"`
}

// Name implements Analyzer.
func (*Completeness) Name() string { return "completeness" }

func init() {
	Register(Registration{Order: 90,
		New: func(cfg Config) Analyzer {
			return &Completeness{GapThreshold: cfg.GapThreshold}
		}})
}

// Version implements Analyzer.
func (*Completeness) Version() string { return "1" }

// Params implements Analyzer.
func (a *Completeness) Params() any { return a }

// Analyze implements Analyzer.
func (a *Completeness) Analyze(ctx context.Context, d *Dataset) ([]Finding, error) {
	return runPass(ctx, a.newPass(), d)
}

// unloggedPass counts, over the slices, the gateway requests routed to
// endpoints that logged nothing for them, and reports gaps and those
// endpoints at the end.
type unloggedPass struct {
	routed map[string]int
	span   map[string][2]time.Time // the routed requests' first and last times: the finding's times
}

func (*Completeness) newPass() pass {
	return &unloggedPass{routed: map[string]int{}, span: map[string][2]time.Time{}}
}

func (p *unloggedPass) slice(_ context.Context, d *Dataset) ([]Finding, error) {
	for _, f := range d.Facts {
		if f.GW != nil && f.Room != 0 && f.Prefill == nil && f.Decode == nil {
			k := f.PrefillEP + " " + f.DecodeEP
			p.routed[k]++
			sp := p.span[k]
			if sp[0].IsZero() || f.TS.Before(sp[0]) {
				sp[0] = f.TS
			}
			if f.TS.After(sp[1]) {
				sp[1] = f.TS
			}
			p.span[k] = sp
		}
	}
	return nil, nil
}

func (p *unloggedPass) finish(_ context.Context, d *Dataset) ([]Finding, error) {
	routed, span := p.routed, p.span
	var out []Finding
	for _, g := range d.Gaps {
		fd := Finding{Severity: Note, Confidence: 0.9, TS: g.From, FirstTS: g.From, LastTS: g.To, DecodeDPRank: -1,
			Title:    fmt.Sprintf("%s logged nothing for %s", g.Node, g.To.Sub(g.From)),
			Subject:  "gap:" + g.Node + ":" + g.From.Format(time.RFC3339),
			GroupKey: "gap:" + g.Node,
			Details:  map[string]string{"node": g.Node, "gap_from": g.From.Format(time.RFC3339), "gap_to": g.To.Format(time.RFC3339)},
			Explanation: fmt.Sprintf("%s has no log lines from %s to %s while other nodes logged; conclusions about requests on %s in that span rest on incomplete evidence. "+
				"Evidence: the node's lines in the minute before and after.", g.Node, fmtTime(g.From), fmtTime(g.To), g.Node),
		}
		if g.To.Sub(g.From) >= time.Hour {
			fd.Severity = Low
		}
		if isDecode(d, g.Node) {
			fd.DecodeNode = g.Node
		} else {
			fd.PrefillNode = g.Node
		}
		fd.Evidence = g.Lines
		out = append(out, fd)
	}
	keys := make([]string, 0, len(routed))
	for k := range routed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if routed[k] < 10 {
			continue
		}
		out = append(out, Finding{Severity: Low, Confidence: 0.7, TS: span[k][0], LastTS: span[k][1], DecodeDPRank: -1,
			Title:       "gateway requests with no engine lines at all (" + k + ")",
			Explanation: fmt.Sprintf("%d PD requests routed to %s have no prefill or decode line: those engines' logs are missing from the evidence.", routed[k], k),
			Subject:     "unlogged:" + k, Details: map[string]string{"endpoints": k, "requests": fmt.Sprint(routed[k])}})
	}
	return out, nil
}

func isDecode(d *Dataset, node string) bool {
	for _, b := range d.Boots.ByNode[node] {
		if b.Role == "decode" {
			return true
		}
	}
	return false
}
