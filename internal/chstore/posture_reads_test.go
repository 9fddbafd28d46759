package chstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// A node's log that carries Prometheus text (whose metric names start
// "sglang:") before its version line: the version line is still among
// the node's version lines. The read is capped, and the metric lines
// used to fill the cap before the version line was reached.
func TestVersionLinesSkipMetricNames(t *testing.T) {
	ctx := context.Background()
	s := testdb.Empty(t)
	if _, err := newMigrator(t, s, nil).Up(ctx); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("[2026-07-01 00:00:01] server starting\n")
	for i := range 20_500 {
		fmt.Fprintf(&b, "# HELP sglang:metric_%d Help text.\n# TYPE sglang:metric_%d gauge\nsglang:metric_%d{tp_rank=\"0\"} 1.0\n", i, i, i)
	}
	b.WriteString("sglang: 0.5.11\nSGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE=1\n")
	path := filepath.Join(t.TempDir(), "decode-0.log")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	src := []ingest.Source{{Path: path, Format: "sglang", Node: "decode-0", Role: "decode"}}
	if _, err := ingest.New(s, ingest.Options{}).Ingest(ctx, src); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	// Samples without a timestamp take the time of ingest, and the lines
	// after them that time.
	lines, err := s.VersionLines(ctx, "decode-0", t0, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, l.Line)
	}
	want := []string{"sglang: 0.5.11", "SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE=1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%d version lines, from %q; want %q", len(got), got[:min(len(got), 2)], want)
	}
}
