package promimport

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/freeport"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// needTool finds a binary the test cannot do without: missing is a failure
// in CI (KVTRAIL_REQUIRE_CLICKHOUSE=1, which also promises the Prometheus
// package) and a skip elsewhere.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(testdb.EnvRequire) == "1" {
			t.Fatalf("%s is required (%s=1) but not installed: %v", name, testdb.EnvRequire, err)
		}
		t.Skipf("%s not installed (apt-get install prometheus): %v", name, err)
	}
	return p
}

// startPrometheus backfills the OpenMetrics text om into a fresh TSDB with
// promtool and serves it with a real Prometheus on a free loopback port.
// It returns the base URL; Prometheus is stopped with SIGTERM at cleanup.
func startPrometheus(t *testing.T, om []byte) string {
	t.Helper()
	promtool, prom := needTool(t, "promtool"), needTool(t, "prometheus")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	omFile := filepath.Join(dir, "data.om")
	if err := os.WriteFile(omFile, om, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", omFile, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool backfill: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 15s\nscrape_configs: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	logTail := func() string {
		b, _ := os.ReadFile(logFile.Name())
		return tail(b)
	}
	cmd := exec.Command(prom, "--config.file="+cfg, "--storage.tsdb.path="+data,
		"--web.listen-address="+addr,
		// Retention counts from the newest block, but once the head compacts
		// anything older than the default 15d would go; the backfill is
		// in the past, so keep everything.
		"--storage.tsdb.retention.time=3650d")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited: %v\n%s", err, logTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 20s\n%s", logTail())
		}
	}
}

// freeAddr is an address for the Prometheus server the test starts:
// picked below the ephemeral range (internal/freeport).
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
