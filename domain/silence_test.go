package domain

import (
	"reflect"
	"testing"
	"time"
)

func TestFindSilences(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	// minutes returns a node's rows for minutes [from, to), lines per
	// minute each, first line id base+minute.
	minutes := func(node string, from, to, lines int, base uint64) []NodeMinute {
		var out []NodeMinute
		for m := from; m < to; m++ {
			out = append(out, NodeMinute{Node: node, Minute: t0.Add(time.Duration(m) * time.Minute), FirstLine: base + uint64(m), Lines: uint64(lines)})
		}
		return out
	}
	cat := func(parts ...[]NodeMinute) []NodeMinute {
		var out []NodeMinute
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	reverse := func(in []NodeMinute) []NodeMinute {
		out := make([]NodeMinute, len(in))
		for i, c := range in {
			out[len(in)-1-i] = c
		}
		return out
	}
	busyGap := Silence{Node: "busy", From: t0.Add(60 * time.Minute), To: t0.Add(120 * time.Minute), Lines: []uint64{1059, 1120}}
	for _, tc := range []struct {
		name   string
		counts []NodeMinute
		want   []Silence
	}{
		{"a busy node silent while another logs",
			cat(minutes("busy", 0, 60, 10, 1000), minutes("busy", 120, 180, 10, 1000), minutes("steady", 0, 180, 1, 5000)),
			[]Silence{busyGap}},
		{"the same rows in any order",
			reverse(cat(minutes("steady", 0, 180, 1, 5000), minutes("busy", 120, 180, 10, 1000), minutes("busy", 0, 60, 10, 1000))),
			[]Silence{busyGap}},
		{"nobody else logged in the silence",
			cat(minutes("busy", 0, 60, 10, 1000), minutes("busy", 120, 180, 10, 1000), minutes("steady", 0, 60, 1, 5000)),
			nil},
		{"a node whose rate predicts too few lines",
			cat(minutes("sparse", 0, 1, 1, 0), minutes("sparse", 170, 171, 1, 0), minutes("steady", 0, 180, 1, 5000)),
			nil},
		{"a silence at the threshold is not one",
			cat(minutes("busy", 0, 60, 10, 1000), minutes("busy", 69, 180, 10, 1000), minutes("steady", 0, 180, 1, 5000)),
			nil},
		{"two nodes' silences, by node",
			cat(minutes("b", 0, 60, 10, 0), minutes("b", 90, 180, 10, 0), minutes("a", 0, 100, 10, 0), minutes("a", 150, 180, 10, 0)),
			[]Silence{
				{Node: "a", From: t0.Add(100 * time.Minute), To: t0.Add(150 * time.Minute), Lines: []uint64{99, 150}},
				{Node: "b", From: t0.Add(60 * time.Minute), To: t0.Add(90 * time.Minute), Lines: []uint64{59, 90}},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FindSilences(tc.counts, 10*time.Minute); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if got := FindSilences(minutes("busy", 0, 10, 10, 0), 0); got != nil {
		t.Fatalf("threshold 0: %+v, want none", got)
	}
}

// BenchmarkFindSilences: 13 nodes over 13 days, a row per node-minute, as
// the completeness analyzer reads them for incident-2026 at any scale.
func BenchmarkFindSilences(b *testing.B) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	var counts []NodeMinute
	for n := range 13 {
		for m := range 13 * 24 * 60 {
			if n == 0 && m%1000 < 30 {
				continue // a silence now and then
			}
			counts = append(counts, NodeMinute{Node: "node-" + string(rune('a'+n)), Minute: t0.Add(time.Duration(m) * time.Minute),
				FirstLine: uint64(n<<32 | m), Lines: 40})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(FindSilences(counts, 10*time.Minute)) == 0 {
			b.Fatal("no silence found")
		}
	}
}
