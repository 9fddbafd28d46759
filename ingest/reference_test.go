package ingest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// The reference's real example lines (kept verbatim in ingest/parse's
// testdata) go through the whole pipeline with format auto-detection:
// every file is recognised, nothing is malformed, and the typed tables get
// the rows those lines describe.
func TestReferenceExampleLinesEndToEnd(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	want := map[string]string{
		"sglang_real.log":        "sglang",
		"sglang_drift.log":       "sglang",
		"glog_real.log":          "mooncake-glog",
		"glog_drift.log":         "mooncake-glog",
		"gateway.jsonl":          "gateway-json",
		"pages.jsonl":            "page-events",
		"request_metrics.jsonl":  "request-metrics",
		"prometheus_real.om":     "prometheus",
		"prometheus_drift.prom":  "prometheus",
		"modelgateway_real.log":  "sgl-model-gateway",
		"modelgateway_drift.log": "sgl-model-gateway",
	}
	var srcs []ingest.Source
	for name := range want {
		srcs = append(srcs, ingest.Source{Path: filepath.Join("parse", "testdata", name), Format: ingest.FormatAuto, Node: "n1", Role: "prefill"})
	}
	sum, err := ingest.New(s, ingest.Options{}).Ingest(ctx, srcs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sum.Sources {
		if got := want[filepath.Base(r.Path)]; r.Format != got {
			t.Errorf("%s detected as %s, want %s", r.Path, r.Format, got)
		}
		if r.Malformed != 0 || r.Records == 0 {
			t.Errorf("%s: %d records, %d malformed", r.Path, r.Records, r.Malformed)
		}
	}
	for table, min := range map[string]uint64{
		"node_boots": 1, "engine_events": 5, "batch_stats": 5, "transfer_events": 3,
		"gateway_responses": 3, "metric_samples": 10, "page_events": 2,
	} {
		if got := count(t, s, "SELECT count() FROM "+table+" FINAL"); got < min {
			t.Errorf("%s: %d rows from the reference lines, want at least %d", table, got, min)
		}
	}
	// The #30233 rejection line of the reference, with its numbers.
	if got := count(t, s, "SELECT count() FROM engine_events WHERE event = 'rejected' AND input_len = 284937 AND limit_tokens = 284922"); got != 1 {
		t.Errorf("the reference's rejection line: %d typed rows, want 1", got)
	}
}
