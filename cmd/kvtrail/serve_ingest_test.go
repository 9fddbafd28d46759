package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serve wires the push path end to end: a poison push is refused with its
// reason, a valid one is stored, and /readyz, /metrics and
// /ingest/v1/status show the spool, its drain lag and the dead letter.
func TestServePushStatus(t *testing.T) {
	requireClickHouseBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "kvtrail.yaml")
	if err := os.WriteFile(cfg, []byte("ingest:\n  require_token: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve", "--config", cfg, "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "ch"))
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`msg=serving url=(\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
	}()
	var url string
	select {
	case url = <-urlc:
	case <-time.After(90 * time.Second):
		t.Fatal("serve did not start")
	}

	post := func(body string) (int, string) {
		resp, err := http.Post(url+"/ingest/v1/lines", "application/x-ndjson", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, msg := post(`{"line":"a","node":"pz","format":"json"}`); code != 400 || !strings.Contains(msg, `format "json" is unknown`) {
		t.Errorf("poison push: %d %s", code, msg)
	}
	if code, msg := post(`{"line":"b","node":"pz","role":"prefill"}`); code != 204 {
		t.Fatalf("valid push: %d %s", code, msg)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(20 * time.Second)
	var st struct {
		Records int   `json:"spool_records"`
		Drained int64 `json:"drained_lines"`
		Dead    int   `json:"dead_letter_records"`
	}
	for {
		code, body := get("/ingest/v1/status")
		if code != 200 {
			t.Fatalf("status: %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		if st.Drained == 1 && st.Records == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Drained != 1 || st.Records != 0 || st.Dead != 0 {
		t.Errorf("status after one valid push: %+v", st)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"spool":{`) || !strings.Contains(body, `"drain_lag_seconds":0`) {
		t.Errorf("/readyz: %d %s", code, body)
	}
	_, metrics := get("/metrics")
	for _, m := range []string{"kvtrail_spool_drain_lag_seconds 0", "kvtrail_spool_drained_lines_total 1", "kvtrail_spool_quarantined_total 0",
		"kvtrail_spool_dead_letter_records 0", "kvtrail_push_inflight_bytes", `kvtrail_push_requests_total{kind="ndjson",reason="bad_request",status="400"} 1`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
}
