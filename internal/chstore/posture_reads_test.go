package chstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// A node's log that carries Prometheus text before its version line:
// the version line is still among the node's version lines. The read is
// capped, and the metric lines (SGLang names every metric "sglang:…")
// used to fill the cap before the version line was reached.
//
// The lines are SGLang's own: the metric name and help text as
// python/sglang/srt/metrics/collector.py declares them, and the version
// as python/sglang/check_env.py prints it (print(f"{k}: {v}") over its
// package list; sgl-project/sglang at 00b08c4).
func TestVersionLinesSkipMetricNames(t *testing.T) {
	s := testdb.New(t)
	const scrape = "# HELP sglang:max_total_num_tokens Maximum total number of tokens in the KV cache pool.\n" +
		"# TYPE sglang:max_total_num_tokens gauge\n" +
		"sglang:max_total_num_tokens{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 681280.0\n" +
		"# HELP sglang:cache_hit_rate The prefix cache hit rate.\n" +
		"# TYPE sglang:cache_hit_rate gauge\n" +
		"sglang:cache_hit_rate{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 0.42\n"
	var b strings.Builder
	b.WriteString("[2026-07-01 00:00:01] server starting\n")
	for range 3_500 { // 21,000 metric lines, past the cap
		b.WriteString(scrape)
	}
	b.WriteString("sglang: 0.5.11\nSGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE=1\n")
	ingestDecodeLog(t, s, b.String())
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	// Samples without a timestamp take the time of ingest, and the lines
	// after them that time.
	got := versionLineTexts(t, s, t0, time.Now().Add(time.Hour))
	want := []string{"sglang: 0.5.11", "SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE=1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%d version lines, from %q; want %q", len(got), got[:min(len(got), 2)], want)
	}
}

// A request line is the customer's text, not the server's: a prompt (or an
// answer) that names a version is not a version line, while the node's
// own version lines around it still are. The Receive and Finish lines
// have the shape SGLang's request logger prints at --log-requests-level 2
// (python/sglang/srt/utils/request_logger.py; the drift fixture in
// ingest/parse/testdata has the same shape).
func TestVersionLinesSkipRequestText(t *testing.T) {
	s := testdb.New(t)
	const log = "[2026-07-01 00:00:00] sglang==0.5.22\n" +
		"[2026-07-01 00:00:05 DP0 TP0] Receive: obj=GenerateReqInput(rid='ee19', text='we run sglang==0.4.0 and SGLANG_ENABLE_X=1, sglang version 0.3', input_ids=None, sampling_params={'max_new_tokens': 16}, return_logprob=False, bootstrap_host='10.0.0.1', bootstrap_port=8998, bootstrap_room=77, bootstrap_pair_key=None, data_parallel_rank=None)\n" +
		"[2026-07-01 00:00:06 DP0 TP0] Finish: obj=GenerateReqInput(rid='ee19', text='we run sglang==0.4.0', bootstrap_host='10.0.0.1', bootstrap_port=8998, bootstrap_room=77), out={'text': 'sglang: 0.4.0 is old', 'output_ids': [1, 2], 'meta_info': {'id': 'ee19', 'finish_reason': {'type': 'stop', 'matched': 2}, 'prompt_tokens': 14, 'completion_tokens': 2, 'cached_tokens': 0, 'e2e_latency': 0.2}}\n" +
		"[2026-07-01 00:00:07] SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE=1\n"
	if sum := ingestDecodeLog(t, s, log); sum.Total.Parsed < 2 {
		t.Fatalf("%d lines parsed, want the Receive and Finish lines among them", sum.Total.Parsed)
	}
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	got := versionLineTexts(t, s, t0, t0.Add(time.Hour))
	want := []string{"[2026-07-01 00:00:00] sglang==0.5.22", "[2026-07-01 00:00:07] SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE=1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("version lines %q, want %q", got, want)
	}
}

// ingestDecodeLog ingests log as decode-0's SGLang log.
func ingestDecodeLog(t *testing.T, s *chstore.Store, log string) ingest.Summary {
	t.Helper()
	path := filepath.Join(t.TempDir(), "decode-0.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	src := []ingest.Source{{Path: path, Format: "sglang", Node: "decode-0", Role: "decode"}}
	sum, err := ingest.New(s, ingest.Options{}).Ingest(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// versionLineTexts are the texts of decode-0's version lines in [from, to].
func versionLineTexts(t *testing.T, s *chstore.Store, from, to time.Time) []string {
	t.Helper()
	lines, err := s.VersionLines(context.Background(), "decode-0", from, to)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, l.Line)
	}
	return got
}
