package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

// binary is the kvtrail binary built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvtrail-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "kvtrail")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build kvtrail: %v\n%s", err, out)
		os.Exit(1)
	}
	// The binary is about 60 MB: each run of this package left one in
	// the temp dir until session 43.
	testdb.Main(m, func() { _ = os.RemoveAll(dir) })
}

// run runs kvtrail with args in dir and returns stdout, stderr and the exit code.
func run(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return so.String(), se.String(), code
}

// cleanEnv drops KVTRAIL_* variables of the developer's shell.
func cleanEnv() []string {
	var out []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "KVTRAIL_") {
			out = append(out, e)
		}
	}
	return out
}

func TestConfigPrecedenceAndMasking(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kvtrail.yaml"), []byte("clickhouse:\n  database: fromfile\n  username: fileuser\n  password: s3cret-pass\nserve:\n  addr: 127.0.0.1:9999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, dir, []string{"KVTRAIL_CLICKHOUSE_DATABASE=fromenv", "KVTRAIL_SERVE_ADDR=127.0.0.1:7777"},
		"config", "print", "--clickhouse-database", "fromflag")
	if code != 0 {
		t.Fatalf("config print exit %d: %s", code, errOut)
	}
	for _, want := range []string{"database: fromflag", "username: fileuser", "addr: 127.0.0.1:7777", "password: <secret>"} {
		if !strings.Contains(out, want) {
			t.Errorf("config print lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret-pass") {
		t.Fatalf("config print leaks the password:\n%s", out)
	}
}

func TestBadConfigIsAClearUsageError(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"typo", "clickhouse:\n  passwrd: x\n", []string{"invalid keys: passwrd"}},
		{"values", "clickhouse:\n  addr: nohost\nlog:\n  level: loud\n", []string{`clickhouse.addr: "nohost" is not host:port`, "log.level"}},
		{"yaml", "clickhouse: [\n", []string{"read config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, errOut, code := run(t, dir, nil, "--config", "c.yaml", "config", "print")
			if code != 2 {
				t.Fatalf("exit %d, want 2 (usage): %s", code, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q: %s", w, errOut)
				}
			}
		})
	}
}

func TestMigrateCommand(t *testing.T) {
	addr := testdb.Addr(t)
	db := fmt.Sprintf("kvt_cli_%d", os.Getpid())
	env := []string{"KVTRAIL_CLICKHOUSE_ADDR=" + addr, "KVTRAIL_CLICKHOUSE_DATABASE=" + db}
	t.Cleanup(func() { run(t, t.TempDir(), env, "migrate", "status") })
	dir := t.TempDir()
	out, errOut, code := run(t, dir, env, "migrate")
	if code != 0 || !strings.Contains(out, "applied 0001_schema.sql") {
		t.Fatalf("first migrate: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = run(t, dir, env, "migrate")
	if code != 0 || !strings.Contains(out, "schema is up to date") {
		t.Fatalf("second migrate: exit %d\n%s\n%s", code, out, errOut)
	}
	out, _, code = run(t, dir, env, "migrate", "status")
	if code != 0 || !regexp.MustCompile(`0001\s+0001_schema.sql\s+applied`).MatchString(out) {
		t.Fatalf("migrate status: exit %d\n%s", code, out)
	}
}

// startServe runs `kvtrail <args>` with a managed ClickHouse in dataDir and
// waits for /readyz. It returns the process and the managed server's pid.
// The returned func gives kvtrail's stderr once the process has exited.
func startServe(t *testing.T, dataDir string, args ...string) (*exec.Cmd, int, func() string) {
	t.Helper()
	cmd := exec.Command(binary, append(args, "--addr", "127.0.0.1:0", "--data-dir", dataDir)...)
	cmd.Dir = filepath.Dir(dataDir) // relative defaults (the spool) land in the test's temp dir
	cmd.Env = cleanEnv()
	url, logs := startServing(t, cmd, args)
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/readyz = %d", resp.StatusCode)
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "pid"))
	if err != nil {
		t.Fatalf("managed ClickHouse pid file: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return cmd, pid, logs
}

// startServing starts cmd (a `kvtrail serve` or `demo`), waits for its
// "serving" log line and returns its URL and a func that returns its log
// once the process has exited.
func startServing(t *testing.T, cmd *exec.Cmd, args []string) (string, func() string) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	var logs strings.Builder
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`msg=serving url=(\S+)`)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
	}()
	select {
	case url := <-urlc:
		return url, func() string { <-readerDone; return logs.String() }
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-readerDone
		t.Fatalf("kvtrail %v did not start serving:\n%s", args, logs.String())
	}
	return "", nil
}

func processGone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		// A zombie still answers kill(0); /proc/PID/stat shows state Z.
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func requireClickHouseBinary(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("clickhouse-server"); err != nil {
		if os.Getenv(testdb.EnvRequire) == "1" {
			t.Fatalf("clickhouse-server required: %v", err)
		}
		t.Skip("clickhouse-server not installed")
	}
}

// The managed server stops with kvtrail, whether kvtrail exits cleanly on
// SIGTERM or is killed outright; a second run reuses the data directory.
func TestServeManagedClickHouseLifecycle(t *testing.T) {
	requireClickHouseBinary(t)
	dataDir := filepath.Join(t.TempDir(), "ch")

	cmd, chPID, logs := startServe(t, dataDir, "serve")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	firstLogs := logs()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	if !processGone(chPID, 20*time.Second) {
		t.Fatalf("clickhouse-server %d still running after kvtrail serve exited", chPID)
	}
	if !strings.Contains(firstLogs, "applied migration") {
		t.Fatalf("first run applied no migration:\n%s", firstLogs)
	}

	// Same data dir again: the schema from the first run is still there,
	// so this run applies nothing. Then kill -9: the server must die too.
	cmd, chPID2, logs2 := startServe(t, dataDir, "demo", "--scale", "0.02")
	_ = cmd.Process.Kill()
	secondLogs := logs2()
	_ = cmd.Wait()
	if strings.Contains(secondLogs, "applied migration") {
		t.Fatalf("second run re-applied migrations, so the data dir was not reused:\n%s", secondLogs)
	}
	if !processGone(chPID2, 20*time.Second) {
		t.Fatalf("clickhouse-server %d outlived kvtrail after SIGKILL", chPID2)
	}
}

// TestProfileFlags: the hidden --cpuprofile, --memprofile and
// --heapprofile flags write profiles pprof can read, for any command.
func TestProfileFlags(t *testing.T) {
	dir := t.TempDir()
	cpu, mem, heap := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof"), filepath.Join(dir, "heap.prof")
	_, errOut, code := run(t, dir, nil, "config", "print", "--cpuprofile", cpu, "--memprofile", mem, "--heapprofile", heap)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, p := range []string{cpu, mem, heap} {
		out, err := exec.Command("go", "tool", "pprof", "-top", binary, p).CombinedOutput()
		if err != nil {
			t.Fatalf("pprof cannot read %s: %v\n%s", filepath.Base(p), err, out)
		}
	}
	if _, errOut, code := run(t, dir, nil, "config", "print", "--memprofile", filepath.Join(dir, "no", "such", "dir", "m.prof")); code == 0 || !strings.Contains(errOut, "memory profile") {
		t.Fatalf("an unwritable profile path: exit %d, stderr %q; want a failure naming the profile", code, errOut)
	}
}

// `kvtrail ingest` links the ingested requests across nodes into
// request_facts (correlation at ingest); --correlate=false leaves it to
// analyze.
func TestIngestCommandLinksRequests(t *testing.T) {
	ctx := context.Background()
	sim := t.TempDir()
	if _, err := simulate.Run(ctx, simulate.Config{Scenario: "incident-2026", Seed: 2, Scale: 0.02, Days: 1, OutDir: sim}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		flag string
		link bool
	}{{"--correlate=true", true}, {"--correlate=false", false}} {
		t.Run(tt.flag, func(t *testing.T) {
			s := testdb.New(t)
			env := []string{"KVTRAIL_CLICKHOUSE_ADDR=" + testdb.Addr(t), "KVTRAIL_CLICKHOUSE_DATABASE=" + s.Database()}
			out, errOut, code := run(t, t.TempDir(), env, "ingest", "--manifest", filepath.Join(sim, "sources.yaml"), "--json", tt.flag)
			if code != 0 {
				t.Fatalf("ingest: exit %d\n%s", code, errOut)
			}
			var sum struct {
				Total struct {
					Records uint64 `json:"records"`
				} `json:"total"`
				Facts *struct {
					Requests int `json:"requests"`
				} `json:"request_facts"`
			}
			if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Total.Records == 0 {
				t.Fatalf("summary %v: %s", err, out)
			}
			var facts, gateway uint64
			if err := s.QueryRow(ctx, "SELECT count() FROM request_facts FINAL").Scan(&facts); err != nil {
				t.Fatal(err)
			}
			if err := s.QueryRow(ctx, "SELECT count() FROM gateway_responses FINAL").Scan(&gateway); err != nil {
				t.Fatal(err)
			}
			if !tt.link {
				if facts != 0 || sum.Facts != nil {
					t.Fatalf("--correlate=false: %d request_facts rows, summary %+v", facts, sum.Facts)
				}
				return
			}
			if sum.Facts == nil || uint64(sum.Facts.Requests) != facts || facts < gateway {
				t.Fatalf("request_facts holds %d rows, summary says %+v, the gateway logged %d responses", facts, sum.Facts, gateway)
			}
		})
	}
}
