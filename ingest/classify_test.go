package ingest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// A file kvtrail cannot classify at all is still ingested: every line kept
// as unknown evidence, a warning in the summary, no error.
func TestUnrecognisedFileIngestedWithWarning(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	p := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(p, []byte("hello\nworld, nothing kvtrail knows\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sum, err := ingest.New(s, ingest.Options{}).Ingest(ctx, []ingest.Source{{Path: p, Format: ingest.FormatAuto, Node: "n0", Role: "prefill"}})
	if err != nil {
		t.Fatalf("ingest failed on an unknown format: %v", err)
	}
	res := sum.Sources[0]
	if res.State != "ingested" || res.Warning == "" || res.Records != 2 || res.Unknown != 2 || res.Format != "unknown" {
		t.Errorf("summary: %+v", res)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines WHERE parse_status = 'unknown' AND log_format = 'unknown'"); got != 2 {
		t.Errorf("raw_lines holds %d unknown lines, want 2", got)
	}
}

// One process stream that starts with Mooncake glog lines: the SGLang lines
// after them are still parsed (the pool-below-context facts), the glog
// failure becomes a transfer event, the progress bar is noise.
func TestMixedStreamLineByLine(t *testing.T) {
	ctx := context.Background()
	s := testdb.New(t)
	content := `WARNING: Logging before InitGoogleLogging() is written to STDERR
I0917 16:19:42.193396 3936072 transfer_engine.cpp:91] Transfer Engine parseHostNameWithPort. server_name: 115.182.224.13 port: 12001
I0917 16:19:42.193420 3936072 transfer_engine.cpp:146] Transfer Engine RPC using P2P handshake, listening on 115.182.224.13:16590
I0917 16:19:42.193531 3936072 transfer_engine.cpp:185] Auto-discovering topology...
[2025-09-17 16:19:50] KV Cache is allocated. #tokens: 681280, K size: 7.26 GB, V size: 7.26 GB
Capturing batches (bs=1 avail_mem=7.64 GB): 100%|██████████| 8/8 [00:01<00:00,  7.22it/s]
[2025-09-17 16:19:51] max_total_num_tokens=681280, chunked_prefill_size=4096, max_prefill_tokens=16384, max_running_requests=2048, context_len=1048576, available_gpu_mem=21.09 GB
E0917 16:23:13.204995 4058290 worker_pool.cpp:294] Worker: Process failed for slice (opcode: 1, source_addr: 0x7fd2fc000800, length: 3584, dest_addr: 0x7fb9dc001000, local_nic: mlx5_7, peer_nic: 115.182.224.13:15004@mlx5_7, dest_rkey: 2136660, retry_cnt: 0): local protection error
`
	p := filepath.Join(t.TempDir(), "prefill-0.log")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	sum, err := ingest.New(s, ingest.Options{}).Ingest(ctx, []ingest.Source{{Path: p, Format: ingest.FormatAuto, Node: "p0", Role: "prefill"}})
	if err != nil {
		t.Fatal(err)
	}
	res := sum.Sources[0]
	if res.Records != 8 || res.Parsed != 4 || res.Noise != 4 || res.Unknown != 0 || res.Warning != "" {
		t.Errorf("summary: %+v", res)
	}
	q := `SELECT count() FROM node_boots FINAL WHERE node = 'p0' AND kv_pool_tokens = 681280 AND max_total_num_tokens = 681280 AND context_len = 1048576`
	if got := count(t, s, q); got != 1 {
		t.Errorf("node_boots rows with the pool and context: %d", got)
	}
	q = `SELECT count() FROM transfer_events WHERE node = 'p0' AND source = 'mooncake' AND event = 'slice_failed' AND peer = '115.182.224.13:15004' AND toYear(ts) = 2025`
	if got := count(t, s, q); got != 1 {
		t.Errorf("slice failure rows: %d", got)
	}
	// Each line carries the format that read it; the file was detected as
	// glog (most of its first lines), its SGLang lines are still SGLang.
	if res.Format != "mooncake-glog" {
		t.Errorf("detected %s", res.Format)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines WHERE log_format = 'sglang'"); got != 2 {
		t.Errorf("raw_lines read as SGLang: %d, want 2", got)
	}
	if got := count(t, s, "SELECT count() FROM raw_lines WHERE parse_status = 'noise' AND position(line, 'Capturing batches') > 0"); got != 1 {
		t.Errorf("progress bar not kept as noise (%d)", got)
	}
}
