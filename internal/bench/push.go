package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/ingest/push"
	"github.com/kvtrail/kvtrail/ingest/spool"
	"github.com/kvtrail/kvtrail/internal/chlocal"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/freeport"
	"github.com/kvtrail/kvtrail/migrations"
)

// PushConfig configures the push soak (`kvtrail bench push`).
type PushConfig struct {
	Clients      int           // concurrent shippers, one stream (node) each
	Duration     time.Duration // how long they push
	Outage       time.Duration // ClickHouse is stopped this long, centred in Duration; 0: no outage
	LinesPerPush int
	Pause        time.Duration // each client's pause between pushes
	// DrainLines sizes the drain-speed measurement after the soak: this
	// many lines are spooled, then drained, and the same lines are
	// ingested from a file by the file ingest path, as the baseline.
	DrainLines int
	Dir        string // work directory (ClickHouse data, spool)
	// MemoryLimit is the soft memory limit the in-process server runs
	// under, as serve's memory_limit; it sets the in-flight push bound.
	MemoryLimit int64
	Log         *slog.Logger
	Progress    io.Writer // one line every 10 s; nil for none
}

// PushResult is what the soak measured.
type PushResult struct {
	Pushes, Retries       int64
	Acked, Stored         uint64 // lines acknowledged; distinct lines in raw_lines
	Counted               uint64 // lines ingest_sources counts for the streams
	Elapsed               time.Duration
	P50, P99, Max         time.Duration // per push, first attempt to acknowledgement
	PeakRSSBytes          uint64
	MaxLagSeconds         float64
	CatchUp               time.Duration // from ClickHouse's restart until the backlog drained
	CatchUpLines          int64
	DrainPerSec, FilePerS float64 // drain of a spooled backlog vs the file ingest path, same lines
	Quarantined           int64
}

// Push runs the soak: an in-process push server (spool, drain, in-flight
// bound, as serve wires them) over a private ClickHouse, Clients shippers
// pushing NDJSON and retrying on 503 or errors as shippers do, ClickHouse
// stopped for Outage in the middle, then a check that every acknowledged
// line is stored once, and a drain-speed measurement.
func Push(ctx context.Context, cfg PushConfig) (*PushResult, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	port, err := freeport.Pick()
	if err != nil {
		return nil, err
	}
	chDir := filepath.Join(cfg.Dir, "clickhouse")
	var ch *chlocal.Server
	startCH := func() error {
		s, err := chlocal.Start(ctx, chlocal.Options{Binary: "clickhouse-server", Dir: chDir, TCPPort: port, StartTimeout: 90 * time.Second})
		if err != nil {
			return fmt.Errorf("start ClickHouse: %w", err)
		}
		ch = s
		return nil
	}
	if err := startCH(); err != nil {
		return nil, err
	}
	defer func() { ch.Stop() }()
	store, err := chstore.Open(ctx, chstore.Options{Addrs: []string{ch.Addr}, Database: "kvtrail_bench_push", Username: "default",
		DialTimeout: time.Second, ReadTimeout: 30 * time.Second, MaxOpenConns: 16})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	m, err := chstore.NewMigrator(store, migrations.FS)
	if err != nil {
		return nil, err
	}
	if _, err := m.Up(ctx); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	sp, err := spool.Open(filepath.Join(cfg.Dir, "spool"), 8<<30)
	if err != nil {
		return nil, err
	}
	defer sp.Close()
	dead, err := spool.Open(filepath.Join(cfg.Dir, "spool", "dead-letter"), 1<<30)
	if err != nil {
		return nil, err
	}
	defer dead.Close()
	sink := ingest.NewPushSink(store, sp, cfg.Log, ingest.WithDeadLetter(dead))
	dctx, stopDrain := context.WithCancel(ctx)
	defer stopDrain()
	go sink.RunDrain(dctx, time.Second)
	lim := push.Limits{MaxCompressedBytes: 10 << 20, MaxDecompressedBytes: 100 << 20}
	budget := push.NewBudget(max(lim.MaxDecompressedBytes, cfg.MemoryLimit/2))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: push.Handler(push.KindNDJSON, lim, sink, cfg.Log, push.WithBudget(budget), push.WithRetryAfter(time.Second))}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String()

	res := &PushResult{}
	var (
		mu      sync.Mutex
		lat     []time.Duration
		acked   atomic.Uint64
		pushes  atomic.Int64
		retries atomic.Int64
		maxLag  atomic.Int64 // ms
	)
	client := &http.Client{Timeout: 60 * time.Second}
	base := time.Now().UTC().Truncate(time.Second)
	start := time.Now()
	end := start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for c := 0; c < cfg.Clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			node := fmt.Sprintf("bench-push-%d", c)
			for n := 0; time.Now().Before(end) && ctx.Err() == nil; n++ {
				body := pushBody(node, base, n*cfg.LinesPerPush, cfg.LinesPerPush)
				t0 := time.Now()
				for {
					resp, err := client.Post(url, "application/x-ndjson", bytes.NewReader(body))
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusNoContent {
							break
						}
					}
					if ctx.Err() != nil {
						return
					}
					retries.Add(1)
					wait := time.Second
					if err == nil {
						if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil {
							wait = time.Duration(s) * time.Second
						}
					}
					time.Sleep(wait)
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				pushes.Add(1)
				acked.Add(uint64(cfg.LinesPerPush))
				time.Sleep(cfg.Pause)
			}
		}(c)
	}
	// The outage, centred in the run, and a sampler of the drain lag.
	var restart time.Time
	var drainedAtRestart int64
	outageErr := make(chan error, 1)
	go func() {
		defer close(outageErr)
		if cfg.Outage <= 0 {
			return
		}
		at := start.Add((cfg.Duration - cfg.Outage) / 2)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(at)):
		}
		cfg.Log.Info("bench: stopping ClickHouse", slog.Duration("for", cfg.Outage))
		ch.Stop()
		select {
		case <-ctx.Done():
			return
		case <-time.After(cfg.Outage):
		}
		mu.Lock()
		restart = time.Now()
		drainedAtRestart = sink.Stats().DrainedLines
		mu.Unlock()
		if err := startCH(); err != nil {
			outageErr <- err
		}
	}()
	ticker := time.NewTicker(250 * time.Millisecond)
	lastProgress := time.Now()
	for time.Now().Before(end) && ctx.Err() == nil {
		<-ticker.C
		st := sink.Stats()
		if ms := int64(st.DrainLagSeconds * 1000); ms > maxLag.Load() {
			maxLag.Store(ms)
		}
		mu.Lock()
		if !restart.IsZero() && res.CatchUp == 0 && st.SpoolRecords <= cfg.Clients {
			res.CatchUp = time.Since(restart)
			res.CatchUpLines = st.DrainedLines - drainedAtRestart
		}
		mu.Unlock()
		if cfg.Progress != nil && time.Since(lastProgress) >= 10*time.Second {
			lastProgress = time.Now()
			fmt.Fprintf(cfg.Progress, "  %4.0fs  pushes %d  acked lines %d  spool %d pushes  drain lag %.1fs  retries %d\n",
				time.Since(start).Seconds(), pushes.Load(), acked.Load(), st.SpoolRecords, st.DrainLagSeconds, retries.Load())
		}
	}
	ticker.Stop()
	wg.Wait()
	res.Elapsed = time.Since(start)
	if err := <-outageErr; err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Everything acknowledged must reach ClickHouse.
	deadline := time.Now().Add(10 * time.Minute)
	for sink.Stats().SpoolRecords > 0 {
		if time.Now().After(deadline) {
			return nil, errors.New("the spool did not drain within 10 minutes after the soak")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if res.CatchUp == 0 && !restart.IsZero() {
		res.CatchUp = time.Since(restart)
		res.CatchUpLines = sink.Stats().DrainedLines - drainedAtRestart
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))] }
		res.P50, res.P99, res.Max = q(0.5), q(0.99), lat[len(lat)-1]
	}
	res.Pushes, res.Retries, res.Acked = pushes.Load(), retries.Load(), acked.Load()
	res.MaxLagSeconds = float64(maxLag.Load()) / 1000
	res.Quarantined = sink.Stats().Quarantined
	if res.Stored, res.Counted, err = store.BenchPushCounts(ctx, "bench-push-"); err != nil {
		return nil, err
	}
	res.PeakRSSBytes = PeakRSS()
	stopDrain()
	if cfg.DrainLines > 0 {
		if err := drainSpeed(ctx, store, cfg, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// drainSpeed spools DrainLines lines (5 streams), drains them, and ingests
// the same lines from files with the file ingest path, in the same run.
func drainSpeed(ctx context.Context, store *chstore.Store, cfg PushConfig, res *PushResult) error {
	sp, err := spool.Open(filepath.Join(cfg.Dir, "speed-spool"), 8<<30)
	if err != nil {
		return err
	}
	defer sp.Close()
	sink := ingest.NewPushSink(store, sp, cfg.Log)
	const streams, perPush = 5, 1000
	base := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	files := make([]*os.File, streams)
	var sources []ingest.Source
	for i := range files {
		p := filepath.Join(cfg.Dir, fmt.Sprintf("speed-%d.log", i))
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		defer f.Close()
		files[i] = f
		sources = append(sources, ingest.Source{Path: p, Node: fmt.Sprintf("bench-file-%d", i), Role: "prefill", Format: "sglang"})
	}
	total := 0
	for n := 0; total < cfg.DrainLines; n++ {
		i := n % streams
		stream := map[string]string{"node": fmt.Sprintf("bench-drain-%d", i), "role": "prefill", "format": "sglang"}
		es := make([]push.Entry, perPush)
		for k := range es {
			idx := n*perPush + k
			ts := base.Add(time.Duration(idx) * time.Millisecond)
			es[k] = push.Entry{Stream: stream, Ts: ts, Line: benchLine(idx, ts)}
			if _, err := fmt.Fprintln(files[i], es[k].Line); err != nil {
				return err
			}
		}
		if err := sink.Accept(ctx, es); err != nil {
			return err
		}
		total += perPush
	}
	for _, f := range files {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	t0 := time.Now()
	if _, err := sink.Drain(ctx); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	res.DrainPerSec = float64(total) / time.Since(t0).Seconds()
	t0 = time.Now()
	if _, err := ingest.New(store, ingest.Options{Logger: cfg.Log}).Ingest(ctx, sources); err != nil {
		return fmt.Errorf("file ingest baseline: %w", err)
	}
	res.FilePerS = float64(total) / time.Since(t0).Seconds()
	return nil
}

// pushBody is one NDJSON push of n SGLang lines of node, from line k on.
func pushBody(node string, base time.Time, k, n int) []byte {
	var b bytes.Buffer
	for i := k; i < k+n; i++ {
		ts := base.Add(time.Duration(i) * time.Millisecond)
		line, _ := json.Marshal(map[string]string{"ts": ts.Format(time.RFC3339Nano), "line": benchLine(i, ts), "node": node, "role": "prefill", "format": "sglang"})
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// benchLine is a real-format SGLang line: every 10th a #30233 rejection.
func benchLine(i int, ts time.Time) string {
	stamp := ts.UTC().Format("2006-01-02 15:04:05")
	if i%10 == 0 {
		return fmt.Sprintf("[%s DP0 TP0] Input length (%d tokens) exceeds the maximum allowed length (681274 tokens). Use a shorter input or enable --allow-auto-truncate., self.rid='rid-%d'", stamp, 700000+i, i)
	}
	return fmt.Sprintf("[%s DP0 TP0] Prefill batch, #new-seq: 1, #new-token: %d, #cached-token: 0, token usage: 0.41, #running-req: 1, #queue-req: 0, input throughput (token/s): 15734.14", stamp, 1000+i)
}
