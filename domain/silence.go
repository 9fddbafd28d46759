package domain

import (
	"cmp"
	"slices"
	"sort"
	"time"
)

// Silence is a span during which a node logged nothing while the rest of
// the fleet did: conclusions touching that node then rest on incomplete
// evidence.
type Silence struct {
	Node     string
	From, To time.Time
	// Lines are a line of the node in the minute before and after.
	Lines []uint64
}

// NodeMinute is how many distinct lines a node logged in one minute, and
// the first of them.
type NodeMinute struct {
	Node      string
	Minute    time.Time
	FirstLine uint64
	Lines     uint64
}

// MinExpectedLines: a silence counts only if the node's average rate
// predicts at least this many lines in it (Poisson: P(0 lines) < 1e-8).
const MinExpectedLines = 20

// FindSilences is the one gap rule, used by the completeness analyzer and
// the UI's overview alike: per node, a stretch longer than threshold
// without lines, where the node's own rate says it should have logged and
// some other node did log.
func FindSilences(counts []NodeMinute, threshold time.Duration) []Silence {
	if threshold <= 0 {
		return nil
	}
	// Per node its minutes (Unix seconds) with their first line, and the
	// minutes any node logged: no key per (node, minute), which at 13
	// nodes over 13 days was a quarter million strings built and hashed.
	type minute struct {
		at   int64
		line uint64
	}
	per := map[string][]minute{}
	total := map[string]uint64{}
	fleet := make(map[int64]struct{}, len(counts)/4+1)
	for _, c := range counts {
		at := c.Minute.Unix()
		per[c.Node] = append(per[c.Node], minute{at, c.FirstLine})
		fleet[at] = struct{}{}
		total[c.Node] += c.Lines
	}
	nodes := make([]string, 0, len(per))
	for n := range per {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	at := func(sec int64) time.Time { return time.Unix(sec, 0).UTC() }
	limit := int64(threshold / time.Second)
	var out []Silence
	for _, n := range nodes {
		ms := per[n]
		slices.SortFunc(ms, func(a, b minute) int { return cmp.Compare(a.at, b.at) })
		for i := 1; i < len(ms); i++ {
			gap := ms[i].at - ms[i-1].at
			if gap <= limit {
				continue
			}
			// An idle node is not a gap: only where its own rate predicts
			// lines in the silence.
			span := float64(ms[len(ms)-1].at-ms[0].at)/60 + 1
			rate := float64(total[n]) / span
			if rate*float64(gap)/60 < MinExpectedLines {
				continue
			}
			others := false
			for t := ms[i-1].at + 60; t < ms[i].at; t += 60 {
				if _, ok := fleet[t]; ok {
					others = true
					break
				}
			}
			if others {
				out = append(out, Silence{Node: n, From: at(ms[i-1].at + 60), To: at(ms[i].at),
					Lines: []uint64{ms[i-1].line, ms[i].line}})
			}
		}
	}
	return out
}
