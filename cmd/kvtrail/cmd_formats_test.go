package main

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One process stream as deployments write it (2>&1): SGLang lines, the
// Mooncake glog lines of the same process, a progress bar, a traceback and
// two lines kvtrail has never seen.
const mixedStream = `I0917 16:19:42.193396 3936072 transfer_engine.cpp:91] Transfer Engine parseHostNameWithPort. server_name: 115.182.224.13 port: 12001
[2025-09-17 16:19:50] KV Cache is allocated. #tokens: 105600, K size: 7.26 GB, V size: 7.26 GB
Capturing batches (bs=1 avail_mem=7.64 GB): 100%|██████████| 8/8 [00:01<00:00,  7.22it/s]
[2025-09-17 16:19:51] max_total_num_tokens=105600, chunked_prefill_size=4096, max_prefill_tokens=16384, max_running_requests=2048, context_len=40960, available_gpu_mem=21.09 GB
E0917 16:23:13.204995 4058290 worker_pool.cpp:294] Worker: Process failed for slice (opcode: 1, source_addr: 0x7fd2fc000800, length: 3584, dest_addr: 0x7fb9dc001000, local_nic: mlx5_7, peer_nic: 115.182.224.13:15004@mlx5_7, dest_rkey: 2136660, retry_cnt: 0): local protection error
[2025-09-17 16:23:14 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2712, in run_scheduler_process
RuntimeError: boom
[2025-09-17 16:23:20 TP3] Watchdog timeout (self.watchdog_timeout=300)
[2025-09-17 16:23:50 TP1] Watchdog timeout (self.watchdog_timeout=600)
`

func TestFormatsCheck(t *testing.T) {
	dir := t.TempDir()
	mixed := filepath.Join(dir, "engine.log")
	if err := os.WriteFile(mixed, []byte(mixedStream), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same stream gzipped must read the same.
	gzPath := filepath.Join(dir, "engine.log.gz")
	f, err := os.Create(gzPath)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	_, _ = zw.Write([]byte(mixedStream))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	strange := filepath.Join(dir, "strange.txt")
	if err := os.WriteFile(strange, []byte("hello\nworld \x1b[31mred\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := run(t, dir, nil, "formats", "check", "--json", mixed, gzPath, strange)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Files []struct {
			Path      string `json:"path"`
			Detected  string `json:"detected_format"`
			Lines     int    `json:"lines"`
			Records   int    `json:"records"`
			Parsed    int    `json:"parsed"`
			Noise     int    `json:"noise"`
			Unknown   int    `json:"unknown"`
			Malformed int    `json:"malformed"`
			Families  []struct {
				Family string `json:"family"`
				Kind   string `json:"kind"`
				Parsed int    `json:"parsed"`
			} `json:"families"`
			Shapes []struct {
				Shape   string `json:"shape"`
				Count   int    `json:"count"`
				Line    int    `json:"example_line"`
				Example string `json:"example"`
			} `json:"unknown_shapes"`
			Warning string `json:"warning"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if len(got.Files) != 3 {
		t.Fatalf("%d files reported", len(got.Files))
	}
	for _, i := range []int{0, 1} {
		m := got.Files[i]
		// 10 lines, 8 records (the traceback is one); parsed: KV pool,
		// limits, slice failure, traceback; noise: glog info, progress bar.
		if m.Lines != 10 || m.Records != 8 || m.Parsed != 4 || m.Noise != 2 || m.Unknown != 2 || m.Malformed != 0 {
			t.Errorf("%s: %+v", m.Path, m)
		}
		if len(m.Shapes) != 1 || m.Shapes[0].Count != 2 || m.Shapes[0].Line != 9 ||
			!strings.HasPrefix(m.Shapes[0].Shape, "[N-N-N N:N:N TPN] Watchdog timeout") {
			t.Errorf("%s shapes: %+v", m.Path, m.Shapes)
		}
		glogTransfer := false
		for _, f := range m.Families {
			if f.Family == "mooncake-glog" && f.Kind == "transfer" && f.Parsed == 1 {
				glogTransfer = true
			}
		}
		if !glogTransfer {
			t.Errorf("%s: the glog slice failure inside the SGLang stream was not parsed: %+v", m.Path, m.Families)
		}
		if m.Warning != "" {
			t.Errorf("%s: unexpected warning %q", m.Path, m.Warning)
		}
	}
	s := got.Files[2]
	if s.Detected != "unknown" || s.Unknown != 2 || s.Warning == "" {
		t.Errorf("strange file: %+v", s)
	}

	// The table names the same things, with control characters escaped.
	out, _, code = run(t, dir, nil, "formats", "check", mixed, strange)
	if code != 0 {
		t.Fatalf("table exit %d", code)
	}
	for _, want := range []string{"PARSED", "NOISE", "UNKNOWN", "mooncake-glog", "progress-bar", "WARNING: no line recognised",
		`world \x1b[Nmred`, "e.g. line 9: [2025-09-17 16:23:20 TP3] Watchdog timeout"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("a raw escape character reached the terminal")
	}

	// Unreadable input is an error; nothing else is.
	if _, _, code := run(t, dir, nil, "formats", "check", filepath.Join(dir, "missing.log")); code == 0 {
		t.Error("a missing file exited 0")
	}
}
