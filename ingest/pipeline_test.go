package ingest_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

func TestMain(m *testing.M) {
	if os.Getenv("KVTRAIL_INGEST_CHILD") != "" {
		os.Exit(childIngest())
	}
	if os.Getenv("KVTRAIL_INGEST_MEMCHILD") != "" {
		os.Exit(memoryChild())
	}
	testdb.Main(m, func() {
		if simDir != "" {
			_ = os.RemoveAll(simDir)
		}
	})
}

var (
	simOnce sync.Once
	simDir  string
	simErr  error
)

// simulated returns a small simulated incident, generated once per test binary.
func simulated(t *testing.T) string {
	t.Helper()
	simOnce.Do(func() {
		simDir, simErr = os.MkdirTemp("", "kvtrail-ingest-sim-")
		if simErr != nil {
			return
		}
		_, simErr = simulate.Run(context.Background(), simulate.Config{Scenario: "incident-2026", Seed: 7, Scale: 0.02, Days: 3, OutDir: simDir})
	})
	if simErr != nil {
		t.Fatalf("simulate: %v", simErr)
	}
	return simDir
}

func count(t *testing.T, s *chstore.Store, q string, args ...any) uint64 {
	t.Helper()
	var n uint64
	if err := s.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func TestIngestSimulatedIncident(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	dir := simulated(t)
	srcs, err := ingest.LoadManifest(filepath.Join(dir, "sources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := ingest.New(s, ingest.Options{}).Ingest(ctx, srcs)
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines FINAL"); got != sum.Total.Records {
		t.Errorf("raw_lines holds %d records, summary says %d", got, sum.Total.Records)
	}
	// Every source was read to its end: the committed offset is its size.
	for _, src := range sum.Sources {
		st, err := os.Stat(src.Path)
		if err != nil {
			t.Fatal(err)
		}
		if src.State != "ingested" || src.Bytes != uint64(st.Size()) {
			t.Errorf("%s: state %s, %d of %d bytes", src.Path, src.State, src.Bytes, st.Size())
		}
	}
	// Gateway responses: one row per line of the gateway logs.
	var gwLines uint64
	for _, f := range []string{"gateway-0.jsonl", "gateway-1.jsonl"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		gwLines += uint64(bytes.Count(b, []byte("\n")))
	}
	if got := count(t, s, "SELECT count() FROM gateway_responses FINAL"); got != gwLines {
		t.Errorf("gateway_responses = %d rows, gateway logs have %d lines", got, gwLines)
	}
	// Every boot in the truth is in node_boots with its limits.
	truth, err := simulate.LoadTruth(filepath.Join(dir, "truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range truth.Nodes {
		q := `SELECT count() FROM node_boots FINAL WHERE node = ? AND max_total_num_tokens = ? AND context_len = ? AND max_req_input_len = ?`
		if got := count(t, s, q, n.Node, n.MaxTotalTokens, n.ContextLen, n.MaxReqInputLen); got == 0 {
			t.Errorf("no node_boots row for %s with pool %d, context %d", n.Node, n.MaxTotalTokens, n.ContextLen)
		}
	}
	// The incident's rejection lines are typed rows, findable by rid.
	if got := count(t, s, "SELECT count() FROM engine_events FINAL WHERE event = 'rejected' AND limit_tokens > 0"); got == 0 {
		t.Error("no rejected engine events")
	}
	if got := count(t, s, "SELECT count() FROM id_index WHERE id_kind = 'room'"); got == 0 {
		t.Error("id_index has no rooms")
	}
	// Metric labels per series: samples carry none, every sample's series
	// has a row with its labels, and first_seen is the series' earliest
	// sample whatever order the metric files were read in.
	if got := count(t, s, "SELECT count() FROM metric_samples WHERE notEmpty(label_keys)"); got != 0 {
		t.Errorf("%d samples carry their own labels, want none", got)
	}
	if got := count(t, s, "SELECT uniqExact(series_id, node) FROM metric_samples"); got == 0 {
		t.Error("no metric samples")
	}
	q := `SELECT count() FROM (SELECT series_id, node, min(ts) AS first FROM metric_samples GROUP BY series_id, node) AS s
 ANY LEFT JOIN (SELECT series_id, node, first_seen, label_keys FROM metric_series FINAL) AS m USING (series_id, node)
 WHERE first_seen != first OR empty(label_keys)`
	if got := count(t, s, q); got != 0 {
		t.Errorf("%d series without a metric_series row, its labels or its first sample time", got)
	}
}

func TestIngestIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	srcs, err := ingest.LoadManifest(filepath.Join(simulated(t), "sources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := ingest.New(s, ingest.Options{}).Ingest(ctx, srcs)
	if err != nil {
		t.Fatal(err)
	}
	tables := []string{"raw_lines", "engine_events", "batch_stats", "transfer_events", "gateway_responses", "metric_samples", "metric_series", "node_boots", "id_index", "line_sources"}
	before := map[string]uint64{}
	for _, tb := range tables {
		before[tb] = count(t, s, "SELECT count() FROM "+tb+" FINAL")
	}
	second, err := ingest.New(s, ingest.Options{}).Ingest(ctx, srcs)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range second.Sources {
		if src.State != "skipped" {
			t.Errorf("second run: %s state %s, want skipped", src.Path, src.State)
		}
	}
	if second.Total.Records != first.Total.Records {
		t.Errorf("second run reports %d records, first %d", second.Total.Records, first.Total.Records)
	}
	// Forced re-ingest writes every row again: the keys fold them together.
	if _, err := ingest.New(s, ingest.Options{Force: true}).Ingest(ctx, srcs); err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if got := count(t, s, "SELECT count() FROM "+tb+" FINAL"); got != before[tb] {
			t.Errorf("%s: %d rows after forced re-ingest, %d before", tb, got, before[tb])
		}
	}
}

// Hostile and broken input is stored, counted and never crashes ingest.
func TestBrokenInputKeptAsEvidence(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	dir := t.TempDir()
	huge := strings.Repeat("A", 3<<20)
	content := "[2026-07-01 00:00:00] max_total_num_tokens=681280, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=64, context_len=1048576, available_gpu_mem=10.00 GB\n" +
		"garbage \x00\x01\x02 not a log line\n" +
		"[2026-07-01 00:00:01 DP0 TP0] Prefill batch, #new-seq: x, #new-token: y\n" +
		"\xff\xfe invalid utf-8 \xc3\x28\n" +
		"Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nValueError: boom\n" +
		"[2026-07-01 00:00:02] <script>window.__xss=1</script> " + huge + "\n" +
		"[2026-07-01 00:00:03] Input length (700000 tokens) exceeds the maximum allowed length (681274 tokens). Use a shorter input or enable --allow-auto-truncate., self.rid='abc'\n" +
		"no newline at end"
	p := filepath.Join(dir, "broken.log")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	sum, err := ingest.New(s, ingest.Options{}).Ingest(ctx, []ingest.Source{{Path: p, Format: "sglang", Node: "p0", Role: "prefill"}})
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}
	res := sum.Sources[0]
	if res.Bytes != uint64(len(content)) {
		t.Errorf("read %d of %d bytes", res.Bytes, len(content))
	}
	if got := count(t, s, "SELECT count() FROM raw_lines"); got != res.Records || got < 6 {
		t.Fatalf("raw_lines = %d, summary records = %d", got, res.Records)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines WHERE position(line, '\xff\xfe') > 0"); got != 1 {
		t.Errorf("invalid UTF-8 line not stored byte for byte (%d rows)", got)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines WHERE position(parse_error, 'truncated') > 0"); got != 1 {
		t.Errorf("the 3 MiB line is not marked truncated (%d rows)", got)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines WHERE position(line, 'Traceback') > 0 AND position(line, 'ValueError') > 0"); got != 1 {
		t.Error("traceback not kept with its record")
	}
	if got := count(t, s, "SELECT count() FROM engine_events WHERE event = 'rejected' AND rid = 'abc' AND input_len = 700000 AND limit_tokens = 681274"); got != 1 {
		t.Error("rejection after broken lines not parsed")
	}
	if res.Malformed == 0 {
		t.Error("the malformed batch line was not counted as malformed")
	}
}

func TestGzipAndStdinSources(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	src := filepath.Join(simulated(t), "prefill-0.log")
	plain, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gz := filepath.Join(dir, "prefill-0.log.gz")
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(plain)
	_ = w.Close()
	if err := os.WriteFile(gz, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	in := ingest.New(s, ingest.Options{})
	a, err := in.IngestSource(ctx, ingest.Source{Path: src, Format: ingest.FormatAuto, Node: "prefill-0", Role: "prefill"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := in.IngestSource(ctx, ingest.Source{Path: gz, Format: ingest.FormatAuto, Node: "prefill-0-gz", Role: "prefill"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Format != "sglang" || b.Format != "sglang" || a.Records != b.Records || a.Parsed != b.Parsed {
		t.Fatalf("plain %+v vs gzip %+v", a.Counts, b.Counts)
	}
	// stdin: run the real binary path through a pipe.
	r, wp, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = wp.Write(plain); wp.Close() }()
	old := os.Stdin
	os.Stdin = r
	c, err := in.IngestSource(ctx, ingest.Source{Path: "-", Format: ingest.FormatAuto, Node: "prefill-0-stdin", Role: "prefill"})
	os.Stdin = old
	if err != nil {
		t.Fatal(err)
	}
	if c.Records != a.Records || c.SourceID == "" || c.SourceID == a.SourceID {
		t.Fatalf("stdin: %d records, source %s; file: %d, %s", c.Records, c.SourceID, a.Records, a.SourceID)
	}
}

func TestManifestErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.log"), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, yaml, want string }{
		{"unknown key", "sources:\n  - path: a.log\n    nod: x\n", "field nod not found"},
		{"bad role", "sources:\n  - path: a.log\n    node: n\n    role: chef\n", `role "chef"`},
		{"no node", "sources:\n  - path: a.log\n", "node is empty"},
		{"bad tz", "sources:\n  - path: a.log\n    node: n\n    timezone: Mars/Base\n", "timezone"},
		{"bad offset", "sources:\n  - path: a.log\n    node: n\n    clock_offset: soon\n", "clock_offset"},
		{"missing file", "sources:\n  - path: nope.log\n    node: n\n", "nope.log"},
		{"bad format", "sources:\n  - path: a.log\n    node: n\n    format: xml\n", `format "xml"`},
		{"empty", "sources: []\n", "no sources"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, "m.yaml")
			if err := os.WriteFile(p, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := ingest.LoadManifest(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadManifest: %v, want error containing %q", err, tt.want)
			}
		})
	}
}

// childIngest runs in a re-executed test binary: it ingests one file with
// the default options so the parent can kill it mid-way.
func childIngest() int {
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Options{
		Addrs: []string{os.Getenv("KVTRAIL_INGEST_CHILD_ADDR")}, Database: os.Getenv("KVTRAIL_INGEST_CHILD_DB"),
		Username: "default", DialTimeout: 5 * time.Second, ReadTimeout: 60 * time.Second, MaxOpenConns: 16,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, err = ingest.New(s, ingest.Options{}).IngestSource(ctx, ingest.Source{
		Path: os.Getenv("KVTRAIL_INGEST_CHILD"), Format: "sglang", Node: "big", Role: "decode"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Kill -9 in the middle of a 600 MB ingest, rerun: the result equals a
// clean run, table by table. (It was 1 GB: the size only has to put the
// kill among many checkpoints before the end, and 1 GB twice cost CI two
// minutes; at 300 MB the kill landed at 85% of the file.)
func TestResumeAfterKillEqualsCleanRun(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and ingests 600 MB twice")
	}
	ctx := context.Background()
	dir := simulated(t)
	// 600 MB: long request lines (writeBigLog) around every engine log of the
	// simulation (boots, batches, failures, tracebacks), so the kill and
	// the resume land among every kind of record.
	tmp := t.TempDir()
	big := filepath.Join(tmp, "big.log")
	head, tail := filepath.Join(tmp, "head.log"), filepath.Join(tmp, "tail.log")
	writeBigLog(t, head, 240<<20)
	writeBigLog(t, tail, 360<<20)
	parts := []string{head}
	for _, n := range []string{"prefill-0.log", "prefill-1.log", "decode-0.log", "decode-1.log", "decode-2.log", "prefill-2.log"} {
		parts = append(parts, filepath.Join(dir, n))
	}
	size := concatFiles(t, big, append(parts, tail)...)
	for _, p := range []string{head, tail} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}

	killedOpts := testdb.Options(t)
	killed, err := chstore.Open(ctx, killedOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer killed.Close()
	migrate(t, killed)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KVTRAIL_INGEST_CHILD="+big, "KVTRAIL_INGEST_CHILD_ADDR="+killedOpts.Addrs[0], "KVTRAIL_INGEST_CHILD_DB="+killedOpts.Database)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until a resume point past a third of the file is committed, then
	// kill without warning. The poll reads file_checkpoints, what a rerun
	// resumes from, not ingest_sources: a window saves ingest_sources
	// first, and a kill between the two inserts rightly leaves the resume
	// point behind. With the default 256 MiB window the first checkpoint
	// can be the one past a third (CI once killed there, and the rerun
	// correctly started from 0).
	deadline := time.Now().Add(5 * time.Minute)
	for {
		n := count(t, killed, "SELECT max(committed_offset) FROM file_checkpoints")
		if n > uint64(size)/3 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("child committed %d of %d bytes in 5 minutes: %s", n, size, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	committed := count(t, killed, "SELECT max(committed_offset) FROM ingest_sources")
	if committed >= uint64(size) {
		t.Fatalf("child finished all %d bytes before it was killed", committed)
	}
	t.Logf("killed at %d of %d bytes committed", committed, size)
	res, err := ingest.New(killed, ingest.Options{}).IngestSource(ctx, ingest.Source{Path: big, Format: "sglang", Node: "big", Role: "decode"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ResumedFrom == 0 {
		t.Fatal("rerun did not resume from the checkpoint")
	}
	if uint64(res.ResumedFrom) > committed {
		t.Fatalf("rerun resumed from %d, past the %d bytes committed", res.ResumedFrom, committed)
	}

	clean := testdb.New(t)
	cres, err := ingest.New(clean, ingest.Options{}).IngestSource(ctx, ingest.Source{Path: big, Format: "sglang", Node: "big", Role: "decode"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Counts != cres.Counts || !res.FirstTS.Equal(cres.FirstTS) || !res.LastTS.Equal(cres.LastTS) {
		t.Errorf("resumed counts %+v [%s..%s], clean %+v [%s..%s]", res.Counts, res.FirstTS, res.LastTS, cres.Counts, cres.FirstTS, cres.LastTS)
	}
	sameTables(t, killed, clean)
}

// sameTables fails t unless a and b hold the same rows in every table
// ingest writes: count and an order-independent digest of each.
func sameTables(t *testing.T, a, b *chstore.Store) {
	t.Helper()
	compareTables(t, a, b)
}

// tableDigests are, per table ingest writes, a count and an
// order-independent digest of the rows (without ingest times and versions).
var tableDigests = []struct{ table, query string }{
	{"raw_lines", "SELECT count(), sum(cityHash64(line_id, line, parse_status, kind)) FROM raw_lines FINAL"},
	{"engine_events", "SELECT count(), sum(cityHash64(line_id, event, rid, bootstrap_room, prompt_tokens)) FROM engine_events FINAL"},
	{"batch_stats", "SELECT count(), sum(cityHash64(line_id, kind, new_token, running_req)) FROM batch_stats FINAL"},
	{"transfer_events", "SELECT count(), sum(cityHash64(line_id, event, reason)) FROM transfer_events FINAL"},
	{"node_boots", "SELECT count(), sum(cityHash64(boot_id, max_total_num_tokens, context_len, facts)) FROM node_boots FINAL"},
	{"id_index", "SELECT count(), sum(cityHash64(id, id_kind, line_id)) FROM id_index FINAL"},
	{"gateway_responses", "SELECT count(), sum(cityHash64(line_id, request_id, tenant, status)) FROM gateway_responses FINAL"},
	{"metric_samples", "SELECT count(), sum(cityHash64(series_id, ts_ms, value)) FROM metric_samples FINAL"},
	{"metric_series", "SELECT count(), sum(cityHash64(series_id, node, name, arrayStringConcat(label_keys, ','), arrayStringConcat(label_values, ','), first_seen)) FROM metric_series FINAL"},
	{"page_events", "SELECT count(), sum(cityHash64(line_id, event, rid)) FROM page_events FINAL"},
	{"request_facts", "SELECT count(), sum(cityHash64(request_key, tenant, links, status, prefill_node, decode_node, arraySum(line_ids))) FROM request_facts FINAL"},
	{"ingest_sources", "SELECT count(), sum(cityHash64(source_id, lines, committed_offset, complete)) FROM ingest_sources FINAL"},
	{"file_checkpoints", "SELECT count(), sum(cityHash64(source_id, stream_id, prefix_digest, lines, committed_offset, complete, state)) FROM file_checkpoints FINAL"},
	// Which source each line names, and the sources (migration 0013):
	// like the checkpoints, they differ when the same lines came through
	// other files.
	{"line_sources", "SELECT count(), sum(cityHash64(line_id, source_ref, source, file_digest)) FROM raw_lines FINAL"},
	{"line_sources", "SELECT count(), sum(cityHash64(source_ref, node, source, file_digest)) FROM line_sources FINAL"},
}

func compareTables(t *testing.T, a, b *chstore.Store, skip ...string) {
	t.Helper()
	ctx := context.Background()
	for _, d := range tableDigests {
		if slices.Contains(skip, d.table) || ((d.table == "file_checkpoints" || d.table == "line_sources") && slices.Contains(skip, "ingest_sources")) {
			continue
		}
		var n1, n2, h1, h2 uint64
		if err := a.QueryRow(ctx, d.query).Scan(&n1, &h1); err != nil {
			t.Fatal(err)
		}
		if err := b.QueryRow(ctx, d.query).Scan(&n2, &h2); err != nil {
			t.Fatal(err)
		}
		if n1 != n2 || h1 != h2 {
			t.Errorf("%s\n %d rows (%x) vs %d rows (%x)", d.query, n1, h1, n2, h2)
		}
	}
}

// concatFiles writes the files parts into path, one after another, and
// returns its size.
func concatFiles(t *testing.T, path string, parts ...string) int64 {
	t.Helper()
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range parts {
		in, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		k, err := io.Copy(out, in)
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

func migrate(t *testing.T, s *chstore.Store) {
	t.Helper()
	m, err := chstore.NewMigrator(s, migrationsFS())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestManifestEndpointsRecorded(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	srcs, err := ingest.LoadManifest(filepath.Join(simulated(t), "sources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var one []ingest.Source
	for _, src := range srcs {
		if src.Node == "prefill-0" && len(src.Endpoints) > 0 {
			one = append(one, src)
			break
		}
	}
	if len(one) == 0 {
		t.Fatal("manifest has no endpoints for prefill-0")
	}
	if _, err := ingest.New(s, ingest.Options{}).Ingest(ctx, one); err != nil {
		t.Fatal(err)
	}
	var eps []string
	if err := s.QueryRow(ctx, "SELECT argMax(endpoints, version) FROM nodes WHERE node = 'prefill-0'").Scan(&eps); err != nil {
		t.Fatal(err)
	}
	if strings.Join(eps, ",") != strings.Join(one[0].Endpoints, ",") {
		t.Fatalf("nodes.endpoints = %v, manifest says %v", eps, one[0].Endpoints)
	}
}

// failingStore fails the Send of the nth INSERT it prepares (counting
// from 1), once: a ClickHouse write failure in the middle of a run.
type failingStore struct {
	*chstore.Store
	n, prepared atomic.Int64
}

func (f *failingStore) OpenInsert(ctx context.Context, table string, cols []string) (ingest.TableWriter, error) {
	x, err := f.Store.OpenInsert(ctx, table, cols)
	if err != nil || f.prepared.Add(1) != f.n.Load() {
		return x, err
	}
	return failingWriter{x}, nil
}

type failingWriter struct{ ingest.TableWriter }

func (w failingWriter) Send() error {
	_ = w.TableWriter.Abort()
	return errors.New("injected: connection reset by peer")
}

// A write that fails mid-run is retried from the checkpoints, like a rerun
// after a crash: the run succeeds and the tables equal a clean run's.
func TestWriteFailureResumesFromCheckpoints(t *testing.T) {
	ctx := context.Background()
	srcs, clean, want := cleanRun(t)
	for _, failAt := range []int64{1, 12} { // the first INSERT; one in a later window
		t.Run(fmt.Sprint("insert ", failAt), func(t *testing.T) {
			fs := &failingStore{Store: testdb.New(t)}
			fs.n.Store(failAt)
			var logs bytes.Buffer
			// Small windows, so the failure lands after some commits.
			got, err := ingest.New(fs, ingest.Options{WindowRecords: 20_000, Logger: slog.New(slog.NewTextHandler(&logs, nil))}).Ingest(ctx, srcs)
			if err != nil {
				t.Fatalf("ingest: %v", err)
			}
			if !strings.Contains(logs.String(), "resuming from checkpoints") {
				t.Fatalf("no retry logged; the failure was not hit:\n%s", logs.String())
			}
			// The write's error is told once, with the sources it left
			// uncommitted named, not once per source.
			if n := strings.Count(logs.String(), "injected: connection reset by peer"); n != 1 || !strings.Contains(logs.String(), " not committed: ") {
				t.Errorf("the write error appears %d times in the retry's log (want once, after the sources it left uncommitted):\n%s", n, logs.String())
			}
			for i, r := range got.Sources {
				if r.State != "ingested" || r.Counts != want.Sources[i].Counts {
					t.Errorf("%s: %s %+v, clean run %+v", r.Path, r.State, r.Counts, want.Sources[i].Counts)
				}
			}
			if got.Total != want.Total {
				t.Errorf("total %+v, clean run %+v", got.Total, want.Total)
			}
			sameTables(t, fs.Store, clean)
		})
	}
}

// With fewer INSERT slots than tables, windows end early but nothing is
// lost or changed.
func TestOneInsertSlotEqualsCleanRun(t *testing.T) {
	ctx := context.Background()
	srcs, clean, _ := cleanRun(t)
	narrow := testdb.New(t)
	if _, err := ingest.New(narrow, ingest.Options{MaxOpenInserts: 1}).Ingest(ctx, srcs); err != nil {
		t.Fatal(err)
	}
	sameTables(t, narrow, clean)
}

// cleanRun ingests the simulated incident with the default options into a
// fresh database: the reference the fault tests compare with.
func cleanRun(t *testing.T) ([]ingest.Source, *chstore.Store, ingest.Summary) {
	t.Helper()
	srcs, err := ingest.LoadManifest(filepath.Join(simulated(t), "sources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	clean := testdb.New(t)
	sum, err := ingest.New(clean, ingest.Options{}).Ingest(context.Background(), srcs)
	if err != nil {
		t.Fatal(err)
	}
	return srcs, clean, sum
}

// A forced re-ingest (after a parser fix, say) whose write fails midway
// still redoes every source: the retry resumes what the forced run itself
// committed and does not skip sources only an earlier run completed.
func TestForcedRunRetriedRedoesEverySource(t *testing.T) {
	ctx := context.Background()
	srcs, clean, _ := cleanRun(t)
	fs := &failingStore{Store: clean}
	fs.n.Store(12)
	start := time.Now()
	sum, err := ingest.New(fs, ingest.Options{Force: true, WindowRecords: 20_000}).Ingest(ctx, srcs)
	if err != nil {
		t.Fatalf("forced ingest: %v", err)
	}
	if fs.prepared.Load() < 12 {
		t.Fatalf("only %d INSERTs: the injected failure was not hit", fs.prepared.Load())
	}
	for _, r := range sum.Sources {
		if r.State != "ingested" {
			t.Errorf("%s: %s, want ingested (forced)", r.Path, r.State)
		}
	}
	var stale uint64
	if err := clean.QueryRow(ctx, "SELECT count() FROM (SELECT source_id, max(version) AS v FROM ingest_sources GROUP BY source_id) WHERE v < ?",
		uint64(start.UnixNano())).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	if stale != 0 {
		t.Fatalf("%d sources kept a checkpoint from before the forced run", stale)
	}
}
