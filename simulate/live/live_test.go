package live

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func post(t *testing.T, url, key, prompt string, stream bool) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 8, "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func words(n int) string { return strings.Repeat("lorem ", n) }

// TestLiveLeakServesStalePages: on 0.5.11 with the prefill pool below the
// context length, a prompt in the gap is answered 200 with another
// request's marker read from stale pages; on the fixed version the same
// prompt gets 400. The logs it wrote, ingested, make rejected_served raise
// HIGH in the first case only.
func TestLiveLeakServesStalePages(t *testing.T) {
	for _, c := range []struct {
		name    string
		version string
		leak    bool
	}{
		{"0.5.11: leak", "0.5.11", true},
		{"0.5.22: refused", "0.5.22", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cl, err := New(Config{Engine: Engine{ContextLen: 2048, PrefillPool: 1024, Version: c.version}, PageSize: 16, LogDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(cl.Handler())
			defer srv.Close()
			marker := "KVT-0123456789abcdef"
			code, body := post(t, srv.URL, "key-a", "Reply with the code "+marker+" "+words(40), false)
			if code != 200 || !strings.Contains(body, marker) {
				t.Fatalf("short probe = %d %s", code, body)
			}
			// 1500 words: above max_req_input_len 1018, below the context.
			code, body = post(t, srv.URL, "key-b", "Reply with the code KVT-fedcba9876543210 "+words(1500), true)
			_, st := cl.State()
			if c.leak {
				if code != 200 || !strings.Contains(body, marker) {
					t.Fatalf("gap prompt = %d, want 200 carrying the other key's marker: %.300s", code, body)
				}
				if st.Leaked != 1 || st.FirstLeak.IsZero() {
					t.Errorf("stats = %+v", st)
				}
			} else {
				if code != 400 || !strings.Contains(body, "exceeds the maximum allowed length") {
					t.Fatalf("gap prompt = %d, want 400: %.300s", code, body)
				}
				if st.Leaked != 0 {
					t.Errorf("stats = %+v", st)
				}
			}
			cl.Close()

			s := testdb.New(t)
			var srcs []ingest.Source
			for node, role := range map[string]string{prefillNode: "prefill", decodeNode: "decode"} {
				srcs = append(srcs, ingest.Source{Path: filepath.Join(dir, node+".log"), Node: node, Role: role, Format: "sglang"})
			}
			srcs = append(srcs, ingest.Source{Path: filepath.Join(dir, gatewayNode+".jsonl"), Node: gatewayNode, Role: "gateway", Format: "gateway-json"},
				ingest.Source{Path: filepath.Join(dir, mooncakeLog+".log"), Node: mooncakeLog, Role: "mooncake", Format: "mooncake-glog"})
			sum, err := ingest.New(s, ingest.Options{}).Ingest(context.Background(), srcs)
			if err != nil {
				t.Fatal(err)
			}
			_ = sum
			r := &analyze.Runner{DB: s, Cfg: analyze.DefaultConfig(), Trigger: "test", SkipReconstruct: true}
			now := time.Now().UTC()
			rep, err := r.Run(context.Background(), analyze.Window{From: now.Add(-time.Hour), To: now.Add(time.Minute)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			high := map[string]int{}
			for _, x := range rep.Runs {
				high[x.Run.Analyzer] += int(x.Run.High)
			}
			if c.leak && high["rejected_served"] == 0 {
				t.Errorf("HIGH by analyzer = %v, want rejected_served", high)
			}
			if !c.leak {
				for a, n := range high {
					if n > 0 {
						t.Errorf("%s raised %d HIGH on the fixed version", a, n)
					}
				}
			}
			t.Logf("HIGH by analyzer: %v", high)
		})
	}
}

func TestLiveLogsParse(t *testing.T) {
	dir := t.TempDir()
	cl, err := New(Config{Engine: Engine{ContextLen: 512, PrefillPool: 1024, Version: "0.5.22", DeferredRelease: true}, LogDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(cl.Handler())
	defer srv.Close()
	post(t, srv.URL, "k", "hello "+words(10), false)
	if code, _ := post(t, srv.URL, "k", words(600), false); code != 400 {
		t.Errorf("over-context prompt = %d, want 400", code)
	}
	resp, err := http.Post(srv.URL+"/admin/reboot", "application/json", strings.NewReader(`{"prefill_pool": 256, "version": "0.5.11"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("reboot: %v %v", resp, err)
	}
	cl.Close()
	b, _ := os.ReadFile(filepath.Join(dir, prefillNode+".log"))
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] server_args=ServerArgs\(.*disaggregation_mode='prefill'`),
		regexp.MustCompile(`(?m)max_total_num_tokens=256, .*context_len=512`),
		regexp.MustCompile(`(?m)sglang==0\.5\.11$`),
		regexp.MustCompile(`(?m)Receive: obj=GenerateReqInput\(rid='[0-9a-f]{32}'.*bootstrap_room=\d+`),
	} {
		if !want.Match(b) {
			t.Errorf("prefill log lacks %s", want)
		}
	}
}
