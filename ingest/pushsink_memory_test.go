package ingest_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/ingest/push"
	"github.com/kvtrail/kvtrail/ingest/spool"
)

// rssBytes reads this process's resident set size.
func rssBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm: %v", err)
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// The memory attack: 8 concurrent pushes of ~99 MB decompressed
// each, against serve's default memory limit (192 MiB). The in-flight
// bound (here serve's default: the larger of max_decompressed_bytes and
// half the memory limit, 100 MiB) lets about one such body in at a time;
// the others get 503 with Retry-After instead of all being decoded at once
// (1.18 GB RSS before). Measured: the RSS growth stays within the bound
// times the cost of handling one body (decoded entries and the spool
// record, about 3x its size).
func TestPushMemoryIsBoundedAcrossRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 8 x 99 MB")
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(192 << 20))
	const bound = 100 << 20
	sp, err := spool.Open(filepath.Join(t.TempDir(), "spool"), 4<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	sink := ingest.NewPushSink(downStore{}, sp, nil)
	budget := push.NewBudget(bound)
	lim := push.Limits{MaxCompressedBytes: 10 << 20, MaxDecompressedBytes: 100 << 20}
	srv := httptest.NewServer(push.Handler(push.KindNDJSON, lim, sink, nil, push.WithBudget(budget)))
	defer srv.Close()

	// One ~99 MB NDJSON body, gzip'd (it compresses to well under 10 MB).
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	raw := 0
	pad := strings.Repeat("k", 120)
	for i := 0; raw < 99<<20-400; i++ {
		n, _ := fmt.Fprintf(zw, `{"ts":%d,"line":"[2026-07-06 00:00:00 DP0 TP0] Prefill batch %d %s","node":"mem","role":"prefill"}`+"\n", 1783296000+i%86400, i, pad)
		raw += n
	}
	zw.Close()
	body := gz.Bytes()
	t.Logf("body: %.1f MB decompressed, %.1f MB gzip", float64(raw)/1e6, float64(len(body))/1e6)

	runtime.GC()
	debug.FreeOSMemory()
	base := rssBytes(t)
	var peak int64
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
				if r := rssBytes(t); r > peak {
					peak = r
				}
			}
		}
	}()
	var wg sync.WaitGroup
	codes := make([]int, 8)
	retry := make([]string, 8)
	for i := range codes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
			req.Header.Set("Content-Encoding", "gzip")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			resp.Body.Close()
			codes[i], retry[i] = resp.StatusCode, resp.Header.Get("Retry-After")
		}(i)
	}
	wg.Wait()
	close(done)
	_, held := budget.InUse()
	growth := peak - base
	t.Logf("statuses %v; budget peak %.0f MiB of %d MiB; RSS %.0f MiB -> peak %.0f MiB (growth %.0f MiB)",
		codes, float64(held)/(1<<20), bound>>20, float64(base)/(1<<20), float64(peak)/(1<<20), float64(growth)/(1<<20))
	accepted := 0
	for i, c := range codes {
		switch c {
		case http.StatusNoContent:
			accepted++
		case http.StatusServiceUnavailable:
			if retry[i] == "" {
				t.Errorf("request %d: 503 without Retry-After", i)
			}
		default:
			t.Errorf("request %d: status %d, want 204 or 503", i, c)
		}
	}
	if accepted == 0 {
		t.Error("no push got through: the bound must admit one body of the largest size")
	}
	if held > bound {
		t.Errorf("in-flight bytes peaked at %d, above the bound %d", held, bound)
	}
	if growth > 3*bound {
		t.Errorf("RSS grew by %d MB, want at most 3x the %d MB bound", growth>>20, bound>>20)
	}
	if sp.Len() != accepted {
		t.Errorf("spool holds %d pushes, want the %d acknowledged", sp.Len(), accepted)
	}
}
