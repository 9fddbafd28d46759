package ingest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/ingest/push"
	"github.com/kvtrail/kvtrail/ingest/spool"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// BenchmarkPushDrain measures the drain alone: a spool of pushes (500
// SGLang lines each, 5 streams) written to ClickHouse. Reported as lines/s.
func BenchmarkPushDrain(b *testing.B) {
	s := testdb.New(b)
	ctx := context.Background()
	const pushes, perPush = 400, 500
	base := time.Date(2026, 7, 4, 0, 0, 0, 0, time.UTC)
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		sp, err := spool.Open(filepath.Join(b.TempDir(), "spool"), 4<<30)
		if err != nil {
			b.Fatal(err)
		}
		sink := ingest.NewPushSink(s, sp, nil)
		for p := 0; p < pushes; p++ {
			stream := map[string]string{"node": fmt.Sprintf("speed-%d", p%5), "role": "prefill", "format": "sglang"}
			es := make([]push.Entry, perPush)
			for i := range es {
				k := (n*pushes+p)*perPush + i
				ts := base.Add(time.Duration(k) * time.Millisecond)
				es[i] = push.Entry{Stream: stream, Ts: ts, Line: sglangLine(k, ts)}
			}
			if err := sink.Accept(ctx, es); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		t0 := time.Now()
		if _, err := sink.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(pushes*perPush)/time.Since(t0).Seconds(), "lines/s")
		sp.Close()
	}
}
