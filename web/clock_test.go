package web

import (
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// TestLineClockRecoversTheIngestCorrection parses lines the way ingest
// does (with a source's clock_offset and time zone) and requires the
// evidence page's reading of the same line to name that correction and the
// node's own clock.
func TestLineClockRecoversTheIngestCorrection(t *testing.T) {
	ist, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	for _, tc := range []struct {
		name, format, line string
		loc                *time.Location
		offset             time.Duration
		wantLogged         string // node clock as written, "" when the line has no time
		wantOffset         time.Duration
	}{
		{"sglang, clock behind", "sglang", "[2026-03-25 09:32:19] KV Cache is allocated. #tokens: 105600, K size: 7.26 GB, V size: 7.26 GB",
			time.UTC, 1500 * time.Millisecond, "2026-03-25 09:32:19.000", 1500 * time.Millisecond},
		{"sglang, clock ahead", "sglang", "[2026-03-25 09:32:19 DP1 TP0] Decode batch. #running-req: 3, #token: 420, token usage: 0.01",
			time.UTC, -2300 * time.Millisecond, "2026-03-25 09:32:19.000", -2300 * time.Millisecond},
		{"sglang in a zone, no offset", "sglang", "[2026-03-25 09:32:19] Memory pool end. avail mem=21.66 GB",
			ist, 0, "2026-03-25 09:32:19.000", -(5*time.Hour + 30*time.Minute)},
		{"gateway json (zone in the line)", "gateway-json", `{"ts":"2026-08-20T10:11:12.123456789Z","request_id":"req-1","tenant":"acme","status":200}`,
			ist, 750 * time.Millisecond, "2026-08-20 10:11:12.123", 750 * time.Millisecond},
		{"mooncake glog (no year)", "mooncake-glog", "I0617 08:42:42.470683   413 rdma_context.cpp:426] Find best gid index: 0 on mlx5_6/",
			time.UTC, -900 * time.Millisecond, "2026-06-17 08:42:42.470", -900 * time.Millisecond},
		{"no time in the line", "sglang", "Traceback (most recent call last):", time.UTC, time.Second, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := parse.NewClassifier(parse.Format(tc.format), parse.ParseOptions{Location: tc.loc, ClockOffset: tc.offset, Year: 2026})
			if err != nil {
				t.Fatal(err)
			}
			p := cl.Parse(parse.Record{Raw: []byte(tc.line), Lines: 1, Length: int64(len(tc.line))})
			var stored uint64
			if !p.TS.IsZero() {
				stored = uint64(p.TS.UnixNano())
			} else {
				stored = uint64(time.Date(2026, 3, 25, 9, 32, 19, 0, time.UTC).UnixNano()) // the shipper's time
			}
			got := newClockReader().clock(tc.format, tc.line, stored)
			if tc.wantLogged == "" {
				if got.Known {
					t.Fatalf("a line without its own time reads as %+v", got)
				}
				return
			}
			if !got.Known || got.Logged.Format("2006-01-02 15:04:05.000") != tc.wantLogged || got.Offset != tc.wantOffset {
				t.Fatalf("clock %+v (logged %s), want logged %s offset %s", got, got.Logged.Format("2006-01-02 15:04:05.000"), tc.wantLogged, tc.wantOffset)
			}
		})
	}
}

func TestOffsetText(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "none", 1500 * time.Millisecond: "+1.500 s", -2300 * time.Millisecond: "−2.300 s",
		-(5*time.Hour + 30*time.Minute): "−5h30m0s"} {
		if got := offsetText(d); got != want {
			t.Errorf("offsetText(%s) = %q, want %q", d, got, want)
		}
	}
	lines := []RawLine{{Node: "a", LineID: 1}, {Node: "a", LineID: 2}, {Node: "b", LineID: 3}, {Node: "c", LineID: 4}}
	clocks := map[uint64]LineClock{1: {Known: true, Offset: time.Second}, 2: {Known: true, Offset: time.Second},
		3: {Known: true, Offset: time.Second}, 4: {}}
	clocks[3] = LineClock{Known: true, Offset: -time.Second}
	got := nodeOffsets(lines, clocks)
	if len(got) != 2 || got[0].Node != "a" || got[0].Lines != 2 || got[0].Mixed || got[0].Offset != time.Second || got[1].Offset != -time.Second {
		t.Errorf("nodeOffsets = %+v", got)
	}
	clocks[2] = LineClock{Known: true, Offset: 3 * time.Second}
	if got := nodeOffsets(lines, clocks); !got[0].Mixed || got[0].Text() != "differs between its sources" {
		t.Errorf("mixed offsets = %+v", got)
	}
}

// BenchmarkLineClocks is the request page's added cost: re-reading the
// own time of 200 evidence lines of mixed formats.
func BenchmarkLineClocks(b *testing.B) {
	samples := []RawLine{
		{LogFormat: "sglang", Line: "[2026-03-25 09:32:19 DP1 TP0] Decode batch. #running-req: 3, #token: 420, token usage: 0.01"},
		{LogFormat: "gateway-json", Line: `{"ts":"2026-08-20T10:11:12.123456789Z","request_id":"req-1","tenant":"acme","status":200}`},
		{LogFormat: "mooncake-glog", Line: "I0617 08:42:42.470683   413 rdma_context.cpp:426] Find best gid index: 0 on mlx5_6/"},
		{LogFormat: "sglang", Line: "[2026-03-25 09:32:19] Receive: obj=GenerateReqInput(rid='0d76', bootstrap_room=66086)"},
	}
	lines := make([]RawLine, 200)
	for i := range lines {
		lines[i] = samples[i%len(samples)]
		lines[i].LineID = uint64(i + 1)
		lines[i].TSNS = uint64(time.Date(2026, 3, 25, 9, 32, 20, 0, time.UTC).UnixNano())
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(lineClocks(lines)) != len(lines) {
			b.Fatal("lines lost")
		}
	}
}

// TestRequestDrift: a node whose lines for a request lie outside the
// gateway's span of it by more than the logs' one-second resolution is
// named, with the lower bound of its remaining skew; lines within the span
// (or within the resolution) say nothing.
func TestRequestDrift(t *testing.T) {
	start := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	ev := func(lane, node string, d time.Duration) TimelineEvent {
		return TimelineEvent{Lane: lane, Node: node, TSNS: uint64(start.Add(d).UnixNano())}
	}
	for _, tc := range []struct {
		name   string
		events []TimelineEvent
		want   string
	}{
		{"inside the span", []TimelineEvent{ev("prefill", "p", 100*time.Millisecond), ev("decode", "d", 1900*time.Millisecond)}, ""},
		{"within the resolution", []TimelineEvent{ev("prefill", "p", -900*time.Millisecond), ev("decode", "d", 2900*time.Millisecond)}, ""},
		{"prefill behind", []TimelineEvent{ev("prefill", "p", -3500*time.Millisecond), ev("prefill", "p", -3*time.Second), ev("decode", "d", time.Second)}, "p behind 2.5s"},
		{"decode ahead", []TimelineEvent{ev("decode", "d", 500*time.Millisecond), ev("decode", "d", 5*time.Second)}, "d ahead 2s"},
		{"both sides: lines disagree", []TimelineEvent{ev("decode", "d", -5*time.Second), ev("decode", "d", 9*time.Second)}, ""},
		{"the gateway's own line is the reference", []TimelineEvent{ev("gateway", "gw", 9*time.Second)}, ""},
	} {
		tl := &Timeline{Request: RequestRow{TSNS: uint64(start.UnixNano()), DurationMs: 2000}, Events: tc.events}
		var got []string
		for _, d := range requestDrift(tl) {
			if d.Behind > 0 {
				got = append(got, d.Node+" behind "+d.Behind.String())
			} else {
				got = append(got, d.Node+" ahead "+d.Ahead.String())
			}
		}
		if strings.Join(got, "; ") != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, got, tc.want)
		}
	}
}
