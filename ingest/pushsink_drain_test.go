package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/ingest/push"
	"github.com/kvtrail/kvtrail/ingest/spool"
	"github.com/kvtrail/kvtrail/internal/chlocal"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/migrations"
)

// privateClickHouse starts a ClickHouse of the test's own (the test stops
// it) and returns a migrated store and a restart function.
func privateClickHouse(t *testing.T) (*chstore.Store, func() *chlocal.Server, func() *chlocal.Server) {
	t.Helper()
	ctx := context.Background()
	testdb.Addr(t) // fails (CI) or skips when ClickHouse is unavailable
	dir := t.TempDir()
	port := freeTCPPort(t)
	var cur *chlocal.Server
	start := func() *chlocal.Server {
		srv, err := chlocal.Start(ctx, chlocal.Options{Binary: "clickhouse-server", Dir: filepath.Join(dir, "ch"), TCPPort: port, StartTimeout: 60 * time.Second})
		if err != nil {
			t.Fatalf("start ClickHouse: %v", err)
		}
		cur = srv
		return srv
	}
	stop := func() *chlocal.Server { cur.Stop(); return cur }
	start()
	t.Cleanup(func() { cur.Stop() })
	s, err := chstore.Open(ctx, chstore.Options{Addrs: []string{cur.Addr}, Database: "kvtrail", Username: "default",
		DialTimeout: time.Second, ReadTimeout: 10 * time.Second, MaxOpenConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m, err := chstore.NewMigrator(s, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	return s, start, stop
}

// The "push hangs during drain": ClickHouse is stopped for 10 s
// while 5 clients push, then restarted. Pushes keep being acknowledged
// quickly throughout (p99 under 1 s), the backlog drains, and every
// acknowledged line is stored and counted exactly once.
func TestPushLatencyWhileOutageDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts ClickHouse")
	}
	ctx := context.Background()
	s, start, stop := privateClickHouse(t)
	sp, err := spool.Open(filepath.Join(t.TempDir(), "spool"), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	sink := ingest.NewPushSink(s, sp, nil)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go sink.RunDrain(dctx, 200*time.Millisecond)
	srv := httptest.NewServer(push.Handler(push.KindNDJSON, push.Limits{}, sink, nil))
	defer srv.Close()

	const clients, perPush = 5, 500
	var (
		mu      sync.Mutex
		lat     []time.Duration
		acked   [clients]int
		failed  atomic.Int64
		stopped atomic.Bool
	)
	client := &http.Client{Timeout: 30 * time.Second}
	base := time.Date(2026, 7, 3, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for n := 0; !stopped.Load(); n++ {
				var body bytes.Buffer
				for i := 0; i < perPush; i++ {
					k := n*perPush + i
					ts := base.Add(time.Duration(k) * time.Millisecond)
					b, _ := json.Marshal(map[string]any{"ts": ts.Format(time.RFC3339Nano), "line": sglangLine(k, ts),
						"node": fmt.Sprintf("drain-%d", c), "role": "prefill", "format": "sglang"})
					body.Write(b)
					body.WriteByte('\n')
				}
				t0 := time.Now()
				resp, err := client.Post(srv.URL, "application/x-ndjson", &body)
				d := time.Since(t0)
				if err != nil {
					failed.Add(1)
					continue
				}
				resp.Body.Close()
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				if resp.StatusCode == http.StatusNoContent {
					acked[c] += perPush
				} else {
					failed.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}(c)
	}
	time.Sleep(3 * time.Second)
	stop()
	time.Sleep(10 * time.Second)
	lagDuringOutage := sink.Stats().DrainLagSeconds
	backlog := sink.Stats().SpoolRecords
	restart := time.Now()
	start()
	drainedBefore := sink.Stats().DrainedLines
	// Keep pushing while the backlog drains, and a little after: for 30 s
	// at most, as five clients pushing without pause can outpace the drain
	// on a loaded 2-core machine (the final Drain below stores the rest).
	deadline := time.Now().Add(30 * time.Second)
	for sink.Stats().SpoolRecords > 10 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	caughtUp := time.Since(restart)
	drainedLines := sink.Stats().DrainedLines - drainedBefore
	time.Sleep(2 * time.Second)
	stopped.Store(true)
	wg.Wait()
	if _, err := sink.Drain(ctx); err != nil {
		t.Fatalf("final drain: %v", err)
	}

	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	total := 0
	for _, n := range acked {
		total += n
	}
	t.Logf("%d pushes (%d lines acknowledged, %d failed); latency p50 %v p99 %v max %v", len(lat), total, failed.Load(), p(0.5), p(0.99), p(1))
	t.Logf("outage backlog %d pushes, drain lag reported %.1fs; caught up %.1fs after the restart, %d lines drained (%.0f lines/s including the restart)",
		backlog, lagDuringOutage, caughtUp.Seconds(), drainedLines, float64(drainedLines)/caughtUp.Seconds())
	if failed.Load() > 0 {
		t.Errorf("%d pushes failed; every push should be acknowledged while the spool has room", failed.Load())
	}
	if p(0.99) >= time.Second {
		t.Errorf("push p99 %v, want under 1s while the outage drains", p(0.99))
	}
	if lagDuringOutage < 8 {
		t.Errorf("drain lag during a 10 s outage reported as %.1fs", lagDuringOutage)
	}
	if got := count(t, s, "SELECT count() FROM (SELECT DISTINCT line_id FROM raw_lines WHERE node LIKE 'drain-%')"); got != uint64(total) {
		t.Errorf("stored %d distinct lines, want the %d acknowledged", got, total)
	}
	if got := count(t, s, "SELECT sum(l) FROM (SELECT argMax(lines, version) AS l FROM ingest_sources WHERE node LIKE 'drain-%' GROUP BY source_id)"); got != uint64(total) {
		t.Errorf("ingest_sources counts %d lines, want %d (distinct stored)", got, total)
	}
}
