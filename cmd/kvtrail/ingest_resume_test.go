package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

// resumeDigests are, per table `kvtrail ingest` writes, a count and an
// order-independent digest of the rows without ingest times and versions.
var resumeDigests = []string{
	"SELECT count(), sum(cityHash64(line_id, line, parse_status, kind)) FROM raw_lines FINAL",
	"SELECT count(), sum(cityHash64(line_id, event, rid, bootstrap_room, prompt_tokens)) FROM engine_events FINAL",
	"SELECT count(), sum(cityHash64(line_id, kind, new_token, running_req)) FROM batch_stats FINAL",
	"SELECT count(), sum(cityHash64(line_id, event, reason)) FROM transfer_events FINAL",
	"SELECT count(), sum(cityHash64(boot_id, max_total_num_tokens, context_len, facts)) FROM node_boots FINAL",
	"SELECT count(), sum(cityHash64(id, id_kind, line_id)) FROM id_index FINAL",
	"SELECT count(), sum(cityHash64(line_id, request_id, tenant, status)) FROM gateway_responses FINAL",
	"SELECT count(), sum(cityHash64(series_id, ts_ms, value)) FROM metric_samples FINAL",
	"SELECT count(), sum(cityHash64(series_id, node, name, arrayStringConcat(label_keys, ','), arrayStringConcat(label_values, ','), first_seen)) FROM metric_series FINAL",
	"SELECT count(), sum(cityHash64(line_id, event, rid)) FROM page_events FINAL",
	"SELECT count(), sum(cityHash64(node, role, arrayStringConcat(endpoints, ','))) FROM nodes FINAL",
	"SELECT count(), sum(cityHash64(request_key, tenant, links, status, prefill_node, decode_node, transfer_failed, arraySum(line_ids))) FROM request_facts FINAL",
	"SELECT count(), sum(cityHash64(source_id, lines, parsed, committed_offset, complete)) FROM ingest_sources FINAL",
	"SELECT count(), sum(cityHash64(source_id, stream_id, prefix_digest, lines, committed_offset, complete, state)) FROM file_checkpoints FINAL",
}

func tableDigests(t *testing.T, s *chstore.Store) []string {
	t.Helper()
	var out []string
	for _, q := range resumeDigests {
		var n, h uint64
		if err := s.QueryRow(context.Background(), q).Scan(&n, &h); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		f := strings.Fields(q)
		out = append(out, fmt.Sprintf("%s: %d rows, digest %x", f[len(f)-2], n, h))
	}
	return out
}

// kill -9 of `kvtrail ingest --manifest` at every phase (rows streamed
// before any checkpoint, every source checkpointed before correlation,
// request_facts written before the correlation step is recorded), then a
// rerun: every table, request_facts included, equals a clean run's.
func TestIngestKilledAtEveryPhaseEqualsCleanRun(t *testing.T) {
	ctx := context.Background()
	sim := t.TempDir()
	if _, err := simulate.Run(ctx, simulate.Config{Scenario: "incident-2026", Seed: 2, Scale: 0.02, Days: 1, OutDir: sim}); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(sim, "sources.yaml")
	envFor := func(s *chstore.Store) []string {
		return []string{"KVTRAIL_CLICKHOUSE_ADDR=" + testdb.Addr(t), "KVTRAIL_CLICKHOUSE_DATABASE=" + s.Database()}
	}
	clean := testdb.New(t)
	if _, errOut, code := run(t, t.TempDir(), envFor(clean), "ingest", "--manifest", manifest); code != 0 {
		t.Fatalf("clean ingest: exit %d\n%s", code, errOut)
	}
	want := tableDigests(t, clean)
	var facts, sources uint64
	if err := clean.QueryRow(ctx, "SELECT count() FROM request_facts FINAL").Scan(&facts); err != nil || facts == 0 {
		t.Fatalf("clean run linked %d requests: %v", facts, err)
	}
	if err := clean.QueryRow(ctx, "SELECT count() FROM file_checkpoints FINAL").Scan(&sources); err != nil {
		t.Fatal(err)
	}

	count := func(s *chstore.Store, q string) uint64 {
		var n uint64
		if err := s.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	phases := []struct {
		name string
		at   func(s *chstore.Store) bool
	}{
		{"rows written, no checkpoint", func(s *chstore.Store) bool {
			return count(s, "SELECT count() FROM raw_lines") > 0 && count(s, "SELECT count() FROM file_checkpoints") == 0
		}},
		{"every source checkpointed, correlation not done", func(s *chstore.Store) bool {
			return count(s, "SELECT count() FROM file_checkpoints FINAL WHERE complete = 1") == sources &&
				count(s, "SELECT count() FROM request_facts") == 0
		}},
		{"request_facts written, correlation step not recorded", func(s *chstore.Store) bool {
			return count(s, "SELECT count() FROM request_facts") > 0 && count(s, "SELECT count() FROM ingest_steps") == 0
		}},
	}
	for _, ph := range phases {
		t.Run(ph.name, func(t *testing.T) {
			var s *chstore.Store
			// The child runs in steps of a few milliseconds between
			// SIGSTOPs, so the phase is observed with the child frozen in
			// it, and the SIGKILL lands there. A child that got through
			// the phase within one step is retried on a fresh database.
			// The last phase lasts one round trip (request_facts' insert
			// acknowledged, the step's insert sent), and the server goes
			// on with an insert already sent while the child is stopped:
			// a fresh-clone CI run on 2026-12-05 missed it five times in a
			// row, beside the other packages' tests.
			for try := 1; ; try++ {
				s = testdb.New(t)
				killed, err := killAt(t, envFor(s), manifest, func() bool { return ph.at(s) })
				if err != nil {
					t.Fatal(err)
				}
				if killed {
					break
				}
				if try == 12 {
					t.Fatalf("the child got through %q within one step %d times", ph.name, try)
				}
			}
			if _, errOut, code := run(t, t.TempDir(), envFor(s), "ingest", "--manifest", manifest); code != 0 {
				t.Fatalf("rerun: exit %d\n%s", code, errOut)
			}
			got := tableDigests(t, s)
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("after a kill -9 with %s and a rerun:\n got %s\nwant %s", ph.name, got[i], want[i])
				}
			}
		})
	}
}

// killAt runs `kvtrail ingest --manifest` in steps and kill -9s it as soon
// as at holds while it is stopped; false if it finished first.
func killAt(t *testing.T, env []string, manifest string, at func() bool) (bool, error) {
	t.Helper()
	cmd := exec.Command(binary, "ingest", "--manifest", manifest)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), env...)
	if err := cmd.Start(); err != nil {
		return false, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	pid := cmd.Process.Pid
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return false, nil
		case <-time.After(2 * time.Millisecond):
		}
		_ = syscall.Kill(pid, syscall.SIGSTOP)
		if at() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-done
			return true, nil
		}
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	<-done
	t.Fatal("ingest did not finish in 3 minutes")
	return false, nil
}

// The command's exit code: a truncated .gz is kept up to the damage,
// reported PARTIAL and fails the run; an empty and a binary file are kept
// and do not.
func TestIngestCommandPartialAndOddFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var plain bytes.Buffer
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&plain, "[2026-07-01 00:%02d:%02d] Receive: obj=GenerateReqInput(rid='%032x', bootstrap_room=%d)\n", i/60%60, i%60, i, 1000+i)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(plain.Bytes())
	_ = zw.Close()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	half := write("app.log.gz", gz.Bytes()[:gz.Len()/2])
	empty := write("empty.log", nil)
	bin := write("core.bin", []byte{0x7f, 'E', 'L', 'F', 0, 1, 2, 0xff, 0xfe, '\n', 0, 0, 3})
	for _, tt := range []struct {
		name  string
		files []string
		code  bool // non-zero exit wanted
		out   string
	}{
		{"truncated gz", []string{half}, true, "PARTIAL " + half},
		{"empty and binary", []string{empty, bin}, false, "ingested"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := testdb.New(t)
			env := []string{"KVTRAIL_CLICKHOUSE_ADDR=" + testdb.Addr(t), "KVTRAIL_CLICKHOUSE_DATABASE=" + s.Database()}
			out, errOut, code := run(t, dir, env, append([]string{"ingest", "--node", "n1", "--role", "decode"}, tt.files...)...)
			if (code != 0) != tt.code || !strings.Contains(out, tt.out) {
				t.Fatalf("exit %d, want non-zero %v; output lacks %q:\n%s\n%s", code, tt.code, tt.out, out, errOut)
			}
			var rows uint64
			if err := s.QueryRow(ctx, "SELECT count() FROM raw_lines FINAL").Scan(&rows); err != nil || rows == 0 {
				t.Fatalf("%d rows kept: %v", rows, err)
			}
		})
	}
}
