package analyze

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Gap is a span during which a node logged nothing while the rest of the
// fleet did: conclusions touching that node then rest on incomplete
// evidence.
type Gap struct {
	Node     string
	From, To time.Time
	// Lines are a line of the node in the minute before and after.
	Lines []uint64
}

// Lines are counted by distinct line_id: rows written twice (overlapping
// ingests, a retried window) before ClickHouse merges them away must not
// raise a node's rate and turn its idle minutes into gaps.
const minuteCountsSQL = `SELECT node, toStartOfMinute(ts) AS bucket, min(line_id), uniqExact(line_id)
FROM raw_lines
WHERE ts >= toDateTime(?) AND ts < toDateTime(?)
GROUP BY node, bucket
ORDER BY node, bucket`

// minExpectedLines: a silence is a gap only if the node's average rate
// predicts at least this many lines in it.
const minExpectedLines = 20

// FindGaps finds per-node silences longer than threshold inside the
// window, while other nodes logged: the one gap rule, used by the
// completeness analyzer and the UI's overview alike.
func FindGaps(ctx context.Context, db DB, w Window, threshold time.Duration) ([]Gap, error) {
	if threshold <= 0 {
		return nil, nil
	}
	rows, err := db.Query(ctx, minuteCountsSQL, unix(w.From), unix(w.To))
	if err != nil {
		return nil, fmt.Errorf("line counts per node: %w", err)
	}
	defer rows.Close()
	per := map[string][]time.Time{}
	line := map[string]uint64{}
	total := map[string]uint64{}
	fleet := map[int64]int{}
	for rows.Next() {
		var node string
		var m time.Time
		var id, n uint64
		if err := rows.Scan(&node, &m, &id, &n); err != nil {
			return nil, fmt.Errorf("scan line counts: %w", err)
		}
		per[node] = append(per[node], m.UTC())
		line[node+"@"+itoa(uint64(m.Unix()))] = id
		fleet[m.Unix()]++
		total[node] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read line counts: %w", err)
	}
	var gaps []Gap
	nodes := make([]string, 0, len(per))
	for n := range per {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		ms := per[n]
		for i := 1; i < len(ms); i++ {
			if ms[i].Sub(ms[i-1]) <= threshold {
				continue
			}
			// Silence is only suspicious where the node's own rate says it
			// should have logged: at least minExpectedLines in the gap
			// (Poisson: P(0 lines) < 1e-8). An idle gateway is not a gap.
			span := ms[len(ms)-1].Sub(ms[0]).Minutes() + 1
			rate := float64(total[n]) / span
			if rate*ms[i].Sub(ms[i-1]).Minutes() < minExpectedLines {
				continue
			}
			// Only a gap if some other node logged inside it.
			others := false
			for t := ms[i-1].Add(time.Minute); t.Before(ms[i]); t = t.Add(time.Minute) {
				if fleet[t.Unix()] > 0 {
					others = true
					break
				}
			}
			if others {
				gaps = append(gaps, Gap{Node: n, From: ms[i-1].Add(time.Minute), To: ms[i],
					Lines: []uint64{line[n+"@"+itoa(uint64(ms[i-1].Unix()))], line[n+"@"+itoa(uint64(ms[i].Unix()))]}})
			}
		}
	}
	return gaps, nil
}

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
func (a *Completeness) Analyze(_ context.Context, d *Dataset) ([]Finding, error) {
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
	// Nodes the gateway routed to that logged nothing.
	routed := map[string]int{}
	span := map[string][2]time.Time{} // the routed requests' first and last times: the finding's times
	for _, f := range d.Facts {
		if f.GW != nil && f.Room != 0 && f.Prefill == nil && f.Decode == nil {
			k := f.PrefillEP + " " + f.DecodeEP
			routed[k]++
			sp := span[k]
			if sp[0].IsZero() || f.TS.Before(sp[0]) {
				sp[0] = f.TS
			}
			if f.TS.After(sp[1]) {
				sp[1] = f.TS
			}
			span[k] = sp
		}
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
