// Package bench measures kvtrail against baselines in the same run, so the
// ratio it prints means something on any machine: `kvtrail bench ingest`
// compares the full ingest pipeline with clickhouse-client loading the same
// raw lines into a plain table.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
)

// Store is what the ingest benchmark needs from ClickHouse
// (*chstore.Store, which holds the statements).
type Store interface {
	ingest.Store
	BenchCreateBaseline(ctx context.Context) error
	BenchLoadBaseline(ctx context.Context, addr string, tsv io.Reader) (time.Duration, error)
	BenchServerCPU(ctx context.Context) (time.Duration, error)
	BenchBaselineRows(ctx context.Context) (uint64, error)
	BenchDropBaseline(ctx context.Context) error
	BenchResetIngest(ctx context.Context) error
	BenchServerFloor(ctx context.Context) (time.Duration, error)
}

var _ Store = (*chstore.Store)(nil)

// IngestResult is one run of the ingest benchmark.
type IngestResult struct {
	Sources int
	// Records is what kvtrail stored: one per physical line, except that a
	// traceback's lines form one record with the line they belong to.
	Records uint64
	// Lines is the physical lines of the input, what the baseline loads.
	Lines    uint64
	Bytes    uint64
	Kvtrail  time.Duration
	Baseline time.Duration
	// BaselineRows is what clickhouse-client loaded (must equal Lines).
	BaselineRows uint64
	// PeakRSSBytes is this process's peak resident set size (VmHWM).
	PeakRSSBytes uint64
	// CPU time (user + system) of each side: kvtrail's process while it
	// ingests, clickhouse-client's, and the server's query threads during
	// each (system.events). Wall time on two shared cores moves with the
	// machine; CPU moves less, and the two sides' CPU ratio shows whether
	// a change in Ratio is kvtrail's or the machine's.
	KvtrailCPU, KvtrailServerCPU   time.Duration
	BaselineCPU, BaselineServerCPU time.Duration
	// ServerFloor is what ClickHouse alone spends storing the rows kvtrail
	// wrote: re-inserting them table to table inside the server, minus
	// reading them (see Ingest). No client, parsing or network is in it.
	ServerFloor time.Duration
}

// CeilingRatio is the best ratio any client could reach with this schema
// on this server: the baseline's time over the server floor.
func (r IngestResult) CeilingRatio() float64 {
	if r.ServerFloor <= 0 {
		return 0
	}
	return r.Baseline.Seconds() / r.ServerFloor.Seconds()
}

// LinesPerSec of kvtrail's ingest: the same physical lines the baseline
// loads, over kvtrail's time.
func (r IngestResult) LinesPerSec() float64 { return float64(r.Lines) / r.Kvtrail.Seconds() }

// BaselineLinesPerSec of the clickhouse-client load.
func (r IngestResult) BaselineLinesPerSec() float64 {
	return float64(r.BaselineRows) / r.Baseline.Seconds()
}

// Ratio is kvtrail's throughput over the baseline's.
func (r IngestResult) Ratio() float64 { return r.LinesPerSec() / r.BaselineLinesPerSec() }

// CPURatio is the same comparison in CPU: the baseline's CPU (client and
// server) over kvtrail's (process and server) for the same lines, so 1
// would be as cheap as clickhouse-client's raw load.
func (r IngestResult) CPURatio() float64 {
	k := r.KvtrailCPU + r.KvtrailServerCPU
	if k <= 0 {
		return 0
	}
	return float64(r.BaselineCPU+r.BaselineServerCPU) / float64(k)
}

// Ingest ingests sources with kvtrail, then loads the same records' raw
// text with clickhouse-client (addr is its native endpoint) into a plain
// MergeTree table, and times both. The baseline is the floor of what any
// loader must do (ship the lines and store them) without parsing or typed
// tables; its input is prepared beforehand and not timed.
func Ingest(ctx context.Context, s Store, addr string, sources []ingest.Source, opts ingest.Options) (IngestResult, error) {
	var res IngestResult
	server0, err := s.BenchServerCPU(ctx)
	if err != nil {
		return res, err
	}
	self0 := processCPU()
	start := time.Now()
	opts.Force = true
	sum, err := ingest.New(s, opts).Ingest(ctx, sources)
	res.Kvtrail = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("kvtrail ingest: %w", err)
	}
	res.KvtrailCPU = processCPU() - self0
	if res.KvtrailServerCPU, err = serverCPUSince(ctx, s, server0); err != nil {
		return res, err
	}
	res.Sources, res.Records, res.Bytes = len(sum.Sources), sum.Total.Records, sum.Total.Bytes
	res.PeakRSSBytes = PeakRSS()

	tsv, err := os.CreateTemp("", "kvtrail-bench-*.tsv")
	if err != nil {
		return res, err
	}
	defer os.Remove(tsv.Name())
	if res.Lines, err = writeBaselineInput(tsv, sources); err != nil {
		tsv.Close()
		return res, err
	}
	if _, err := tsv.Seek(0, io.SeekStart); err != nil {
		return res, err
	}
	defer tsv.Close()

	if err := s.BenchCreateBaseline(ctx); err != nil {
		return res, err
	}
	if server0, err = s.BenchServerCPU(ctx); err != nil {
		return res, err
	}
	start = time.Now()
	if res.BaselineCPU, err = s.BenchLoadBaseline(ctx, addr, tsv); err != nil {
		return res, err
	}
	res.Baseline = time.Since(start)
	if res.BaselineServerCPU, err = serverCPUSince(ctx, s, server0); err != nil {
		return res, err
	}
	if res.BaselineRows, err = s.BenchBaselineRows(ctx); err != nil {
		return res, err
	}
	_ = s.BenchDropBaseline(ctx)
	if res.ServerFloor, err = s.BenchServerFloor(ctx); err != nil {
		return res, fmt.Errorf("server floor: %w", err)
	}
	return res, nil
}

// serverCPUSince is the server's query-thread CPU since the reading from.
func serverCPUSince(ctx context.Context, s Store, from time.Duration) (time.Duration, error) {
	now, err := s.BenchServerCPU(ctx)
	return max(now-from, 0), err
}

// Reset empties every table an ingest writes, so another run starts from
// the same state as the first.
func Reset(ctx context.Context, s Store) error { return s.BenchResetIngest(ctx) }

// writeBaselineInput writes every physical line of the sources as a
// TabSeparated row (escaped, so tabs and backslashes in logs survive) and
// returns how many it wrote.
func writeBaselineInput(w io.Writer, sources []ingest.Source) (uint64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	var n uint64
	for _, src := range sources {
		f, err := os.Open(src.Path)
		if err != nil {
			return n, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			writeEscaped(bw, sc.Bytes())
			bw.WriteByte('\n')
			n++
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return n, fmt.Errorf("read %s: %w", filepath.Base(src.Path), err)
		}
	}
	return n, bw.Flush()
}

func writeEscaped(w *bufio.Writer, b []byte) {
	for _, c := range b {
		switch c {
		case '\\':
			w.WriteString(`\\`)
		case '\t':
			w.WriteString(`\t`)
		case '\n':
			w.WriteString(`\n`)
		case '\r':
			w.WriteString(`\r`)
		case 0:
			w.WriteString(`\0`)
		default:
			w.WriteByte(c)
		}
	}
}

// PeakRSS is this process's peak resident set size in bytes, VmHWM from
// /proc/self/status (0 where unavailable).
func PeakRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
