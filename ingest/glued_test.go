package ingest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// gluedLog holds SGLang lines two ranks wrote into one stream without a
// newline between them. The transfer pair is two real lines verbatim, two
// tensor-parallel ranks failing one request in the same second (corpus
// mooncake-851.log, kvcache-ai/Mooncake#851, SGLang v0.5.2). The batch
// lines are corpus sglang-22331.log's (sgl-project/sglang#22331, v0.5.10):
// the first verbatim, the glued pair its 14:05:21 line with DP0 and DP1 put
// into the prefix, as SGLang writes it for data-parallel ranks
// (docs/sglang-log-formats.md §0, §b2); no real log of two DP ranks'
// batch lines was at hand.
const gluedLog = "[2026-04-08 14:05:22 TP0] Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, cuda graph: True, gen throughput (token/s): 140.27, #queue-req: 0\n" +
	"[2026-04-08 14:05:21 DP0 TP0] Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, cuda graph: True, gen throughput (token/s): 144.95, #queue-req: 0" +
	"[2026-04-08 14:05:21 DP1 TP0] Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, cuda graph: True, gen throughput (token/s): 144.95, #queue-req: 0\n" +
	"[2025-09-17 16:23:13 TP1] Decode transfer failed for request rank=1 decode_req.req.rid='3ce84ffb82764f45b028dd8e6c4beed1' decode_req.req.bootstrap_room=1655955501905217457 with exception KVTransferError(bootstrap_room=1655955501905217457): Failed due to an unknown reason from another rank" +
	"[2025-09-17 16:23:13 TP2] Decode transfer failed for request rank=2 decode_req.req.rid='3ce84ffb82764f45b028dd8e6c4beed1' decode_req.req.bootstrap_room=1655955501905217457 with exception KVTransferError(bootstrap_room=1655955501905217457): Failed due to an unknown reason from another rank\n"

// TestGluedMessagesKeepTheirRows: each message of a glued line keeps its
// own row in its table after the table's merges, a forced re-ingest still
// folds into the same rows, and the analysis reads both messages (not one
// as a copy of the other).
func TestGluedMessagesKeepTheirRows(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	p := filepath.Join(t.TempDir(), "decode.log")
	if err := os.WriteFile(p, []byte(gluedLog), 0o600); err != nil {
		t.Fatal(err)
	}
	src := []ingest.Source{{Path: p, Format: "sglang", Node: "d0", Role: "decode"}}
	if _, err := ingest.New(s, ingest.Options{}).Ingest(ctx, src); err != nil {
		t.Fatal(err)
	}
	// A forced re-ingest writes every row a second time, for the merge to
	// fold.
	if _, err := ingest.New(s, ingest.Options{Force: true}).Ingest(ctx, src); err != nil {
		t.Fatal(err)
	}

	// Before any merge the analysis's reads see each row once: both
	// ranks' failures, not one as a copy of the other.
	var read []string
	from, to := time.Date(2025, 9, 17, 16, 23, 0, 0, time.UTC), time.Date(2025, 9, 17, 16, 24, 0, 0, time.UTC)
	if err := s.ScanTransferEvents(ctx, from, to, func(e *domain.TransferEvent) error {
		read = append(read, fmt.Sprintf("%s msg %d", e.RID, e.Msg))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rid := "3ce84ffb82764f45b028dd8e6c4beed1"
	if want := []string{rid + " msg 0", rid + " msg 1"}; !slices.Equal(read, want) {
		t.Errorf("transfer events read: %v, want %v", read, want)
	}

	for _, tb := range []string{"raw_lines", "batch_stats", "transfer_events"} {
		if err := s.Exec(ctx, "OPTIMIZE TABLE "+tb+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	// What is stored once the tables are merged.
	for _, c := range []struct {
		what, query string
		want        uint64
	}{
		{"raw_lines (a glued line is one record)", "SELECT count() FROM raw_lines", 3},
		{"batch_stats rows at 14:05:21 (DP0 and DP1)", "SELECT count() FROM batch_stats WHERE ts = toDateTime('2026-04-08 14:05:21', 'UTC')", 2},
		{"the glued DP1 batch message's own row (msg_index 1)",
			"SELECT count() FROM batch_stats WHERE ts = toDateTime('2026-04-08 14:05:21', 'UTC') AND dp_rank = 1 AND msg_index = 1", 1},
		{"batch_stats rows", "SELECT count() FROM batch_stats", 3},
		{"transfer_events rows", "SELECT count() FROM transfer_events", 2},
		{"lines the two transfer failures cite", "SELECT uniqExact(line_id) FROM transfer_events", 1},
		{"ranks of the two transfer failures", "SELECT uniqExact(tp_rank) FROM transfer_events", 2},
	} {
		if got := count(t, s, c.query); got != c.want {
			t.Errorf("%s: %d after the merge, want %d", c.what, got, c.want)
		}
	}
}
