package domain

import (
	"sort"
	"strconv"
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
	per := map[string][]time.Time{}
	line := map[string]uint64{}
	total := map[string]uint64{}
	fleet := map[int64]int{}
	key := func(node string, m time.Time) string { return node + "@" + strconv.FormatInt(m.Unix(), 10) }
	for _, c := range counts {
		m := c.Minute.UTC()
		per[c.Node] = append(per[c.Node], m)
		line[key(c.Node, m)] = c.FirstLine
		fleet[m.Unix()]++
		total[c.Node] += c.Lines
	}
	nodes := make([]string, 0, len(per))
	for n := range per {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var out []Silence
	for _, n := range nodes {
		ms := per[n]
		sort.Slice(ms, func(i, j int) bool { return ms[i].Before(ms[j]) })
		for i := 1; i < len(ms); i++ {
			if ms[i].Sub(ms[i-1]) <= threshold {
				continue
			}
			// An idle node is not a gap: only where its own rate predicts
			// lines in the silence.
			span := ms[len(ms)-1].Sub(ms[0]).Minutes() + 1
			rate := float64(total[n]) / span
			if rate*ms[i].Sub(ms[i-1]).Minutes() < MinExpectedLines {
				continue
			}
			others := false
			for t := ms[i-1].Add(time.Minute); t.Before(ms[i]); t = t.Add(time.Minute) {
				if fleet[t.Unix()] > 0 {
					others = true
					break
				}
			}
			if others {
				out = append(out, Silence{Node: n, From: ms[i-1].Add(time.Minute), To: ms[i],
					Lines: []uint64{line[key(n, ms[i-1])], line[key(n, ms[i])]}})
			}
		}
	}
	return out
}
