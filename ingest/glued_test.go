package ingest_test

import (
	"context"
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
// newline between them (the formats are the fixtures' real lines, see
// parse/testdata/sglang_real.log and sglang_drift.log): two DP ranks'
// "Decode batch" lines in one second, and two ranks' transfer failures
// in one second.
const gluedLog = "[2026-07-01 00:00:04 DP0 TP0] Decode batch. #running-req: 1, #token: 512, token usage: 0.01, pre-allocated usage: 0.00, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0, \n" +
	"[2026-07-01 00:00:05 DP0 TP0] Decode batch. #running-req: 3, #token: 4096, token usage: 0.04, pre-allocated usage: 0.01, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 99.10, #queue-req: 0, " +
	"[2026-07-01 00:00:05 DP1 TP0] Decode batch. #running-req: 5, #token: 2048, token usage: 0.02, pre-allocated usage: 0.01, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 80.10, #queue-req: 0, \n" +
	"[2026-07-01 00:00:06 TP0] Decode transfer failed for request rank=0 decode_req.req.rid='bb14' decode_req.req.bootstrap_room=45 with exception KVTransferError(bootstrap_room=45): Aborted by AbortReq." +
	"[2026-07-01 00:00:06 TP1] Decode transfer failed for request rank=1 decode_req.req.rid='bb15' decode_req.req.bootstrap_room=46 with exception KVTransferError(bootstrap_room=46): Aborted by AbortReq.\n"

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

	// Before any merge the analysis's reads see each row once.
	var rids []string
	from, to := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 7, 1, 0, 1, 0, 0, time.UTC)
	if err := s.ScanTransferEvents(ctx, from, to, func(e *domain.TransferEvent) error {
		rids = append(rids, e.RID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rids, []string{"bb14", "bb15"}) {
		t.Errorf("transfer events read: %v, want [bb14 bb15]", rids)
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
		{"batch_stats rows at 00:00:05 (DP0 and DP1)", "SELECT count() FROM batch_stats WHERE ts = toDateTime('2026-07-01 00:00:05', 'UTC')", 2},
		{"the glued DP1 batch message's own row (msg_index 1)",
			"SELECT count() FROM batch_stats WHERE ts = toDateTime('2026-07-01 00:00:05', 'UTC') AND dp_rank = 1 AND running_req = 5 AND msg_index = 1", 1},
		{"batch_stats rows", "SELECT count() FROM batch_stats", 3},
		{"transfer_events rows", "SELECT count() FROM transfer_events", 2},
		{"lines the two transfer failures cite", "SELECT uniqExact(line_id) FROM transfer_events", 1},
	} {
		if got := count(t, s, c.query); got != c.want {
			t.Errorf("%s: %d after the merge, want %d", c.what, got, c.want)
		}
	}
}
