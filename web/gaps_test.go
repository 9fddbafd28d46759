package web

import (
	"testing"
	"time"
)

// Pushed streams have no size or end: they are "streaming", never
// "incomplete"; the overview sums sources per node.
func TestIngestByNode(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	rows := []SourceRow{
		{Node: "p0", LogFormat: "sglang", Lines: 10, Size: 100, CommittedOffset: 100, Complete: 1, FirstTS: t0, LastTS: t0.Add(time.Hour)},
		{Node: "p0", LogFormat: "sglang", Lines: 5, Size: 100, CommittedOffset: 40, Complete: 0, FirstTS: t0.Add(-time.Hour), LastTS: t0},
		{Node: "p0", LogFormat: "mooncake-glog", Lines: 7, Malformed: 1, FirstTS: time.Unix(0, 0), LastTS: t0.Add(2 * time.Hour)},
		{Node: "g0", LogFormat: "gateway-json", Lines: 3, Size: 10, CommittedOffset: 10, Complete: 1},
	}
	if rows[2].Incomplete() || !rows[2].Pushed() || !rows[1].Incomplete() || rows[0].Incomplete() {
		t.Fatal("pushed/incomplete states wrong")
	}
	got := ingestByNode(rows)
	if len(got) != 2 || got[0].Node != "g0" {
		t.Fatalf("nodes %+v", got)
	}
	p := got[1]
	if p.Sources != 3 || p.Lines != 22 || p.Incomplete != 1 || p.Pushed != 1 || p.Malformed != 1 || len(p.Formats) != 2 ||
		!p.First.Equal(t0.Add(-time.Hour)) || !p.Last.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("p0 = %+v", p)
	}
}
