package chstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// The statements of `kvtrail bench ingest` (internal/bench): its baseline
// table loaded by clickhouse-client, the reset between runs and the
// server floor.

// BenchCreateBaseline (re)creates the plain one-column table the baseline
// loads the raw lines into.
func (s *Store) BenchCreateBaseline(ctx context.Context) error {
	if err := s.BenchDropBaseline(ctx); err != nil {
		return err
	}
	if err := s.Exec(ctx, "CREATE TABLE bench_baseline (line String) ENGINE = MergeTree ORDER BY tuple()"); err != nil {
		return fmt.Errorf("create baseline table: %w", err)
	}
	return nil
}

// BenchDropBaseline drops the baseline table.
func (s *Store) BenchDropBaseline(ctx context.Context) error {
	return s.Exec(ctx, "DROP TABLE IF EXISTS bench_baseline")
}

// BenchLoadBaseline loads tsv (one TabSeparated line per row) into the
// baseline table with clickhouse-client talking to addr (host:port,
// native): the client that kvtrail's ingest is compared with. It returns
// the CPU time (user + system) clickhouse-client spent.
func (s *Store) BenchLoadBaseline(ctx context.Context, addr string, tsv io.Reader) (time.Duration, error) {
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		return 0, fmt.Errorf("clickhouse address %q is not host:port", addr)
	}
	cmd := exec.CommandContext(ctx, "clickhouse-client", "--host", host, "--port", port,
		"--query", "INSERT INTO "+quoteIdent(s.db)+".bench_baseline (line) FORMAT TabSeparated")
	cmd.Stdin = tsv
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("clickhouse-client baseline load: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// BenchServerCPU is the CPU time (user + system) the server's query
// threads have spent since it started, from system.events: read before
// and after a load, the difference is what the server spent on it (and on
// anything else it ran meanwhile, so the bench wants a quiet server).
// Merges in the background pool are not in it on 18.16.
func (s *Store) BenchServerCPU(ctx context.Context) (time.Duration, error) {
	var us uint64
	err := s.QueryRow(ctx, "SELECT sum(value) FROM system.events WHERE event IN ('UserTimeMicroseconds', 'SystemTimeMicroseconds')").Scan(&us)
	if err != nil {
		return 0, fmt.Errorf("server CPU from system.events: %w", err)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// BenchBaselineRows is how many rows the baseline table holds.
func (s *Store) BenchBaselineRows(ctx context.Context) (uint64, error) {
	var n uint64
	err := s.QueryRow(ctx, "SELECT count() FROM bench_baseline").Scan(&n)
	return n, err
}

// benchRowTables are the tables an ingest writes rows to.
var benchRowTables = []string{"line_sources", "raw_lines", "id_index", "node_boots", "engine_events", "batch_stats",
	"transfer_events", "gateway_responses", "metric_series", "metric_samples", "page_events"}

// BenchResetIngest empties every table an ingest writes, so another run
// starts from the same state as the first.
func (s *Store) BenchResetIngest(ctx context.Context) error {
	for _, t := range append(benchRowTables, "nodes", "ingest_sources", "file_checkpoints", "ingest_steps") {
		if err := s.Exec(ctx, "TRUNCATE TABLE "+t); err != nil {
			return fmt.Errorf("reset %s: %w", t, err)
		}
	}
	return nil
}

// BenchServerFloor measures the server's own cost of storing what an
// ingest wrote: for each table, INSERT INTO a copy SELECT * FROM it, minus
// a SELECT * of it read to nowhere (FORMAT Null). What remains is what the
// server spends sorting, compressing and writing the rows, with no client
// in the loop: a lower bound on any ingest of these rows into this schema.
func (s *Store) BenchServerFloor(ctx context.Context) (time.Duration, error) {
	var total time.Duration
	for _, t := range benchRowTables {
		var n uint64
		if err := s.QueryRow(ctx, "SELECT count() FROM "+t).Scan(&n); err != nil {
			return 0, err
		}
		if n == 0 {
			continue
		}
		cp := "bench_floor_" + t
		if err := s.Exec(ctx, "DROP TABLE IF EXISTS "+cp); err != nil {
			return 0, err
		}
		if err := s.ExecDDL(ctx, "CREATE TABLE "+cp+" AS "+t); err != nil {
			return 0, err
		}
		start := time.Now()
		if err := s.Exec(ctx, "SELECT * FROM "+t+" FORMAT Null"); err != nil {
			return 0, err
		}
		read := time.Since(start)
		start = time.Now()
		if err := s.Exec(ctx, "INSERT INTO "+cp+" SELECT * FROM "+t); err != nil {
			return 0, err
		}
		total += max(time.Since(start)-read, 0)
		if err := s.Exec(ctx, "DROP TABLE "+cp); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// DiskBytes is what the database's active parts take on disk.
func (s *Store) DiskBytes(ctx context.Context) (uint64, error) {
	var n uint64
	err := s.QueryRow(ctx, "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = ? AND active", s.db).Scan(&n)
	return n, err
}
