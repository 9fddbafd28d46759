package ingest_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// writeLines appends lines from..to-1 of a deterministic engine log to path:
// one record per line (batches, Receive, Finish, rejections), each line
// distinct, so records equal lines.
func writeLines(t *testing.T, path string, from, to int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	base := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	for i := from; i < to; i++ {
		ts := base.Add(time.Duration(i) * 100 * time.Millisecond).Format("2006-01-02 15:04:05")
		switch i % 4 {
		case 0:
			fmt.Fprintf(w, "[%s DP%d TP%d] Decode batch, #running-req: %d, #token: %d, token usage: 0.41, #queue-req: 0\n", ts, i%8, i%8, i%50, i*7)
		case 1:
			fmt.Fprintf(w, "[%s] Receive: obj=GenerateReqInput(rid='%032x', bootstrap_host='10.0.0.11', bootstrap_port=8998, bootstrap_room=%d, data_parallel_rank=None)\n", ts, i, 1000000+i)
		case 2:
			fmt.Fprintf(w, "[%s] Finish: obj=GenerateReqInput(rid='%032x', bootstrap_room=%d), out={'meta_info': {'id': '%032x', 'finish_reason': {'type': 'stop', 'matched': 2}, 'prompt_tokens': %d, 'completion_tokens': 128, 'cached_tokens': 0, 'e2e_latency': 1.5}}\n", ts, i-1, 1000000+i-1, i-1, 1000+i%5000)
		default:
			fmt.Fprintf(w, "[%s DP0 TP0] Input length (%d tokens) exceeds the maximum allowed length (681274 tokens). Use a shorter input or enable --allow-auto-truncate., self.rid='%032x'\n", ts, 700000+i%1000, i)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func gzipFile(t *testing.T, src, dst string) []byte {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func src(path string) ingest.Source {
	return ingest.Source{Path: path, Format: "sglang", Node: "n1", Role: "decode"}
}

// A file that grows, is rotated, or arrives again compressed: every line
// is stored once, and the tables equal a clean run of the same content,
// whichever way and in whatever order it arrives.
func TestGrowingRotatedCompressedFiles(t *testing.T) {
	ctx := context.Background()
	type step struct {
		name  string
		do    func(t *testing.T, dir string)
		paths []string // ingested after do, in one run
		// want is raw_lines after the step; resumed, when set, the offset
		// the first path must continue from.
		want    uint64
		resumed bool
	}
	dir0 := t.TempDir()
	full := filepath.Join(dir0, "full60k.log") // the content of a clean run
	writeLines(t, full, 0, 60000)
	tests := []struct {
		name  string
		steps []step
		clean func(t *testing.T, dir string) []string // files a clean run ingests
	}{
		{
			name: "grow by 10k, then a .gz copy",
			steps: []step{
				{"50k lines", func(t *testing.T, d string) { writeLines(t, filepath.Join(d, "app.log"), 0, 50000) }, []string{"app.log"}, 50000, false},
				{"append 10k", func(t *testing.T, d string) { writeLines(t, filepath.Join(d, "app.log"), 50000, 60000) }, []string{"app.log"}, 60000, true},
				{"the same again", func(t *testing.T, d string) {}, []string{"app.log"}, 60000, false},
				{".gz copy", func(t *testing.T, d string) { gzipFile(t, filepath.Join(d, "app.log"), filepath.Join(d, "app.log.gz")) }, []string{"app.log.gz"}, 60000, true},
			},
			clean: func(t *testing.T, d string) []string {
				copyFile(t, full, filepath.Join(d, "app.log"))
				return []string{"app.log"}
			},
		},
		{
			name: ".gz first, then the plain file",
			steps: []step{
				{".gz", func(t *testing.T, d string) {
					copyFile(t, full, filepath.Join(d, "app.log"))
					gzipFile(t, filepath.Join(d, "app.log"), filepath.Join(d, "app.log.1.gz"))
				}, []string{"app.log.1.gz"}, 60000, false},
				{"plain", func(t *testing.T, d string) {}, []string{"app.log"}, 60000, true},
			},
			clean: func(t *testing.T, d string) []string {
				copyFile(t, full, filepath.Join(d, "app.log"))
				return []string{"app.log"}
			},
		},
		{
			name: "logrotate: rename, new file, then compress",
			steps: []step{
				{"50k lines", func(t *testing.T, d string) { writeLines(t, filepath.Join(d, "app.log"), 0, 50000) }, []string{"app.log"}, 50000, false},
				{"grow, rotate, new file", func(t *testing.T, d string) {
					writeLines(t, filepath.Join(d, "app.log"), 50000, 55000)
					if err := os.Rename(filepath.Join(d, "app.log"), filepath.Join(d, "app.log.1")); err != nil {
						t.Fatal(err)
					}
					writeLines(t, filepath.Join(d, "app.log"), 55000, 60000)
				}, []string{"app.log.1", "app.log"}, 60000, true},
				{"compress the rotated file", func(t *testing.T, d string) {
					gzipFile(t, filepath.Join(d, "app.log.1"), filepath.Join(d, "app.log.1.gz"))
					if err := os.Remove(filepath.Join(d, "app.log.1")); err != nil {
						t.Fatal(err)
					}
				}, []string{"app.log.1.gz", "app.log"}, 60000, true},
			},
			clean: func(t *testing.T, d string) []string {
				writeLines(t, filepath.Join(d, "app.log.1"), 0, 55000)
				writeLines(t, filepath.Join(d, "app.log"), 55000, 60000)
				return []string{"app.log.1", "app.log"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testdb.New(t)
			dir := t.TempDir()
			for _, st := range tt.steps {
				st.do(t, dir)
				var srcs []ingest.Source
				for _, p := range st.paths {
					srcs = append(srcs, src(filepath.Join(dir, p)))
				}
				sum, err := ingest.New(s, ingest.Options{}).Ingest(ctx, srcs)
				if err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				if got := count(t, s, "SELECT count() FROM raw_lines FINAL"); got != st.want {
					t.Fatalf("%s: raw_lines = %d, want %d", st.name, got, st.want)
				}
				if resumed := sum.Sources[0].ResumedFrom > 0; resumed != st.resumed {
					t.Errorf("%s: %s resumed from %d, want resumed=%v", st.name, st.paths[0], sum.Sources[0].ResumedFrom, st.resumed)
				}
				// Completeness counts distinct lines: summed over sources,
				// never more than were stored.
				if got := count(t, s, "SELECT sum(lines) FROM ingest_sources FINAL"); got != st.want {
					t.Errorf("%s: ingest_sources counts %d lines, %d stored", st.name, got, st.want)
				}
			}
			clean := testdb.New(t)
			cdir := t.TempDir()
			var srcs []ingest.Source
			for _, p := range tt.clean(t, cdir) {
				srcs = append(srcs, src(filepath.Join(cdir, p)))
			}
			if _, err := ingest.New(clean, ingest.Options{}).Ingest(ctx, srcs); err != nil {
				t.Fatal(err)
			}
			sameTablesExcept(t, s, clean, "ingest_sources")
		})
	}
}

// A truncated .gz keeps every record up to the damage, is recorded as
// partial with the offsets, and the run fails; a rerun adds nothing and
// fails again.
func TestTruncatedGzipKeepsReadableLines(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	dir := t.TempDir()
	plain := filepath.Join(dir, "app.log")
	writeLines(t, plain, 0, 60000)
	gz := gzipFile(t, plain, filepath.Join(dir, "whole.gz"))
	half := filepath.Join(dir, "app.log.gz")
	if err := os.WriteFile(half, gz[:len(gz)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	// What zcat recovers: the lines before the damage, and the start of
	// the line it cut.
	zr, err := gzip.NewReader(bytes.NewReader(gz[:len(gz)/2]))
	if err != nil {
		t.Fatal(err)
	}
	readable, err := io.ReadAll(zr)
	if err == nil {
		t.Fatal("half a gzip file read without error")
	}
	want := uint64(bytes.Count(readable, []byte("\n")))
	if len(readable) > 0 && readable[len(readable)-1] != '\n' {
		want++
	}
	if want < 1000 {
		t.Fatalf("only %d readable lines", want)
	}
	for run := 1; run <= 2; run++ {
		res, err := ingest.New(s, ingest.Options{}).IngestSource(ctx, src(half))
		var partial *ingest.PartialError
		if !errors.As(err, &partial) || res.State != "partial" {
			t.Fatalf("run %d: state %q, error %v; want partial", run, res.State, err)
		}
		if got := count(t, s, "SELECT count() FROM raw_lines FINAL"); got != want {
			t.Fatalf("run %d: raw_lines = %d, zcat recovers %d lines", run, got, want)
		}
		if res.Records != want || partial.Offset != int64(len(readable)) {
			t.Errorf("run %d: %d records, offset %d; want %d, %d", run, res.Records, partial.Offset, want, len(readable))
		}
		q := "SELECT count() FROM file_checkpoints FINAL WHERE state = 'partial' AND complete = 0 AND damage_offset > 0 AND committed_offset = ?"
		if got := count(t, s, q, uint64(len(readable))); got != 1 {
			t.Errorf("run %d: no partial checkpoint at offset %d", run, len(readable))
		}
		if got := count(t, s, "SELECT count() FROM ingest_sources FINAL WHERE complete = 0 AND lines = ?", want); got != 1 {
			t.Errorf("run %d: ingest_sources does not show the source incomplete with %d lines", run, want)
		}
	}
	// The whole file arrives after all: the rest is added, the cut line
	// is replaced by the whole one, nothing is doubled.
	if err := os.WriteFile(half, gz, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := ingest.New(s, ingest.Options{}).IngestSource(ctx, src(half))
	if err != nil || res.State != "ingested" || res.Records != 60000 || res.ResumedFrom == 0 {
		t.Fatalf("whole file: %+v, %v", res, err)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines FINAL"); got != 60000 {
		t.Errorf("raw_lines = %d after the whole file, want 60000", got)
	}
}

// An empty file and a binary file are kept (the binary's bytes as
// evidence) and do not fail the run.
func TestEmptyAndBinaryFilesDoNotFailTheRun(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	dir := t.TempDir()
	empty, bin, good := filepath.Join(dir, "empty.log"), filepath.Join(dir, "core.bin"), filepath.Join(dir, "app.log")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 3000)
	for i := range b {
		b[i] = byte(i * 7919 % 251)
	}
	if err := os.WriteFile(bin, b, 0o600); err != nil {
		t.Fatal(err)
	}
	writeLines(t, good, 0, 100)
	var srcs []ingest.Source
	for i, p := range []string{empty, bin, good} {
		srcs = append(srcs, ingest.Source{Path: p, Format: ingest.FormatAuto, Node: fmt.Sprintf("n%d", i), Role: "decode"})
	}
	sum, err := ingest.New(s, ingest.Options{}).Ingest(ctx, srcs)
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}
	for _, r := range sum.Sources {
		if r.State != "ingested" {
			t.Errorf("%s: state %s (%s)", r.Path, r.State, r.Error)
		}
	}
	if got := count(t, s, "SELECT count() FROM raw_lines FINAL WHERE node = 'n1'"); got == 0 || got != sum.Sources[1].Records {
		t.Errorf("binary file: %d rows kept, %d records", got, sum.Sources[1].Records)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines FINAL WHERE node = 'n2'"); got != 100 {
		t.Errorf("good file: %d rows", got)
	}
	if got := count(t, s, "SELECT count() FROM ingest_sources FINAL WHERE complete = 1"); got != 3 {
		t.Errorf("%d of 3 sources recorded complete", got)
	}
}

// sameTablesExcept is sameTables without the named tables (a source's
// checkpoints differ when the same lines came through other files).
func sameTablesExcept(t *testing.T, a, b *chstore.Store, skip ...string) {
	t.Helper()
	compareTables(t, a, b, skip...)
}

// saveLegacyCheckpoint writes the checkpoint a kvtrail before migration
// 0004 saved for the file at p on n1 (lines records, the whole file
// committed): its source id the SHA-256 of the file, no file_checkpoints
// row. It returns that id and the file's size.
func saveLegacyCheckpoint(t *testing.T, s *chstore.Store, p string, lines uint64) (string, uint64) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	legacy, size := hex.EncodeToString(sum[:]), uint64(len(b))
	err = s.Exec(context.Background(), `INSERT INTO ingest_sources (source_id, path, node, role, log_format, first_ts, last_ts, lines, parsed, unknown,
 malformed, bytes, committed_offset, size, complete, updated_at, version) SELECT ?, ?, 'n1', 'decode', 'sglang', now(), now(), ?, ?, 0, 0, ?, ?, ?, 1, now(), 1`,
		legacy, p, lines, lines, size, size, size)
	if err != nil {
		t.Fatal(err)
	}
	return legacy, size
}

// A file ingested before migration 0004 (its source id and line ids the
// SHA-256 of the whole file) keeps that id: unchanged it is skipped, grown
// it continues from the saved offset with the same line ids.
func TestFileIngestedBeforeStreamsContinues(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "app.log")
	writeLines(t, p, 0, 5000)
	legacy, size := saveLegacyCheckpoint(t, s, p, 5000)
	res, err := ingest.New(s, ingest.Options{}).IngestSource(ctx, src(p))
	if err != nil || res.State != "skipped" || res.SourceID != legacy {
		t.Fatalf("unchanged: state %s, source %s, %v; want skipped as %s", res.State, res.SourceID, err, legacy)
	}
	writeLines(t, p, 5000, 6000)
	res, err = ingest.New(s, ingest.Options{}).IngestSource(ctx, src(p))
	if err != nil || res.ResumedFrom != int64(size) || res.Records != 6000 {
		t.Fatalf("grown: %+v, %v; want resumed from %d with 6000 records", res, err, size)
	}
	// New lines name their stream by reference (migration 0013).
	ref := ingest.SourceRef("n1", p, legacy)
	q := "SELECT count() FROM raw_lines FINAL WHERE source_ref = ? AND byte_offset >= ? AND line_id = ?"
	if got := count(t, s, "SELECT count() FROM raw_lines FINAL WHERE source_ref = ?", ref); got != 1000 {
		t.Errorf("%d new rows under the old id, want 1000", got)
	}
	if got := count(t, s, q, ref, size, ingest.LineID(legacy, int64(size))); got != 1 {
		t.Error("the first new line does not have the id the old scheme gives it")
	}
}

// legacyCounting counts the per-file legacy lookups a run makes.
type legacyCounting struct {
	*chstore.Store
	calls atomic.Int64
}

func (c *legacyCounting) LegacySourceCheckpoints(ctx context.Context, node, path string) ([]ingest.LegacySource, error) {
	c.calls.Add(1)
	return c.Store.LegacySourceCheckpoints(ctx, node, path)
}

// noLegacyList is a store that cannot list legacy paths in one query.
type noLegacyList struct{ ingest.Store }

// A run reads which paths have pre-0004 checkpoints once, and only those
// files ask for them: none on a fresh database, the one file that has
// them otherwise, which still continues under its old id. A store that
// cannot list them gets the per-file question for every file, as before.
func TestLegacyCheckpointsAskedOnlyWhereTheyExist(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	dir := t.TempDir()
	var sources []ingest.Source
	for i := range 4 {
		p := filepath.Join(dir, fmt.Sprintf("app%d.log", i))
		writeLines(t, p, i*1000, i*1000+500)
		sources = append(sources, src(p))
	}
	c := &legacyCounting{Store: s}
	if _, err := ingest.New(c, ingest.Options{}).Ingest(ctx, sources); err != nil {
		t.Fatal(err)
	}
	if n := c.calls.Load(); n != 0 {
		t.Fatalf("fresh database: %d per-file legacy lookups, want 0", n)
	}

	// The same files on a store that cannot list: every file asks.
	c2 := &legacyCounting{Store: testdb.New(t)}
	if _, err := ingest.New(noLegacyList{c2}, ingest.Options{}).Ingest(ctx, sources); err != nil {
		t.Fatal(err)
	}
	if n := c2.calls.Load(); n != int64(len(sources)) {
		t.Fatalf("without the list: %d per-file legacy lookups, want %d", n, len(sources))
	}

	// A pre-0004 checkpoint for one new file: it alone asks, and resumes.
	p := filepath.Join(dir, "old.log")
	writeLines(t, p, 9000, 9400)
	legacy, size := saveLegacyCheckpoint(t, s, p, 400)
	writeLines(t, p, 9400, 9500)
	c.calls.Store(0)
	sumRun, err := ingest.New(c, ingest.Options{}).Ingest(ctx, append(sources, src(p)))
	if err != nil {
		t.Fatal(err)
	}
	if n := c.calls.Load(); n != 1 {
		t.Fatalf("one legacy file among %d: %d per-file legacy lookups, want 1", len(sources)+1, n)
	}
	if r := sumRun.Sources[len(sources)]; r.SourceID != legacy || r.ResumedFrom != int64(size) || r.Records != 500 {
		// Records counts the source's lines: the 400 saved and 100 new.
		t.Fatalf("legacy file: %+v; want source %s resumed from %d with 500 records", r, legacy, size)
	}
}

// A file read while a line is still being written: the half line is kept,
// and once the file has grown the whole line replaces it (one row).
func TestLineBeingWrittenIsCompletedNotSplit(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	p := filepath.Join(t.TempDir(), "app.log")
	writeLines(t, p, 0, 100)
	whole := "[2026-07-01 00:00:10] Receive: obj=GenerateReqInput(rid='" + fmt.Sprintf("%032x", 9999) + "', bootstrap_host='10.0.0.11', bootstrap_port=8998, bootstrap_room=42, data_parallel_rank=None)"
	appendText := func(text string) {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	appendText(whole[:60])
	res, err := ingest.New(s, ingest.Options{}).IngestSource(ctx, src(p))
	if err != nil || res.Records != 101 {
		t.Fatalf("first read: %d records, %v; want 101", res.Records, err)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines FINAL WHERE line = ?", whole[:60]); got != 1 {
		t.Fatalf("the half line is not kept (%d rows)", got)
	}
	appendText(whole[60:] + "\n")
	writeLines(t, p, 100, 110)
	res, err = ingest.New(s, ingest.Options{}).IngestSource(ctx, src(p))
	if err != nil || res.Records != 111 {
		t.Fatalf("after growth: %d records, %v; want 111", res.Records, err)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines FINAL"); got != 111 {
		t.Errorf("raw_lines = %d, want 111", got)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines FINAL WHERE line = ?", whole); got != 1 {
		t.Errorf("the whole line is stored %d times", got)
	}
	if got := count(t, s, "SELECT count() FROM engine_events FINAL WHERE bootstrap_room = 42"); got != 1 {
		t.Errorf("the completed line gave %d engine events", got)
	}
}

// Two different files that start with the same 4 KiB on one node: neither
// takes the other's line ids, whichever is longer and in either order.
func TestSameHeadDifferentFilesKeepTheirLines(t *testing.T) {
	ctx := context.Background()
	for _, order := range [][2]string{{"long", "short"}, {"short", "long"}} {
		t.Run(order[0]+" first", func(t *testing.T) {
			s := testdb.New(t)
			dir := t.TempDir()
			files := map[string]string{"long": filepath.Join(dir, "a.log"), "short": filepath.Join(dir, "b.log")}
			writeLines(t, files["long"], 0, 3000)
			writeLines(t, files["long"], 10000, 11000)
			writeLines(t, files["short"], 0, 3000)
			writeLines(t, files["short"], 20000, 20500)
			for _, name := range order {
				if _, err := ingest.New(s, ingest.Options{}).IngestSource(ctx, src(files[name])); err != nil {
					t.Fatal(err)
				}
			}
			// 3000 shared lines may be stored once or twice; the lines
			// that differ are all there, each under an id of its own.
			for _, q := range []string{
				"SELECT count() FROM raw_lines FINAL WHERE position(line, 'Decode batch, #running-req: 0, #token: 70000,') > 0",
				"SELECT count() FROM raw_lines FINAL WHERE position(line, 'Decode batch, #running-req: 0, #token: 140000,') > 0",
			} {
				if got := count(t, s, q); got != 1 {
					t.Errorf("%s: %d rows", q, got)
				}
			}
			if got := count(t, s, "SELECT count() FROM (SELECT line_id FROM raw_lines FINAL GROUP BY line_id HAVING uniqExact(line) > 1)"); got != 0 {
				t.Errorf("%d line ids name two different lines", got)
			}
			if got := count(t, s, "SELECT count() FROM raw_lines FINAL WHERE byte_offset >= ?", uint64(0)); got < 3000+1000+500 {
				t.Errorf("%d rows, fewer than the distinct lines", got)
			}
		})
	}
}
