package chdbstore

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// A second holder of a store directory is refused with a Conflict that
// names the first (and its URL once it serves); releasing frees it.
func TestLockRefusesASecondHolder(t *testing.T) {
	dir := t.TempDir()
	started := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	first, err := Acquire(dir, Holder{PID: 4242, Command: "serve", Started: started})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		url  string
		want []string
	}{
		{"starting", "", []string{dir, "`kvtrail serve`", "pid 4242", "2026-07-01T12:00:00Z", "stop it first"}},
		{"serving", "http://127.0.0.1:8080", []string{"`kvtrail serve`", "pid 4242", "UI and API at http://127.0.0.1:8080"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.url != "" {
				if err := first.SetURL(tt.url); err != nil {
					t.Fatal(err)
				}
			}
			second, err := Acquire(dir, Holder{PID: 1, Command: "ingest", Started: time.Now()})
			if err == nil {
				second.Release()
				t.Fatal("a second holder got the lock")
			}
			if k := domain.KindOf(err); k != domain.Conflict || domain.ExitCode(k) != 5 {
				t.Fatalf("kind %v (exit %d), want conflict (exit 5): %v", k, domain.ExitCode(k), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
	first.Release()
	again, err := Acquire(dir, Holder{PID: 2, Command: "analyze", Started: time.Now()})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	if again.Holder().Command != "analyze" {
		t.Fatalf("holder %+v", again.Holder())
	}
	again.Release()
}

const lockChildEnv = "KVTRAIL_LOCK_TEST_CHILD_DIR"

// The helper process of TestLockDiesWithItsHolder: the test binary run
// again with lockChildEnv set holds the lock until it is killed.
func init() {
	if dir := os.Getenv(lockChildEnv); dir != "" {
		l, err := Acquire(dir, Holder{PID: os.Getpid(), Command: "serve", Started: time.Now()})
		if err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		_ = l
		os.Stdout.WriteString("locked\n")
		time.Sleep(time.Hour)
		os.Exit(0)
	}
}

// A holder killed with SIGKILL leaves no stale lock: the kernel drops it.
// While it lives, another process is refused with its pid.
func TestLockDiesWithItsHolder(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("child: %q", line)
	}
	_, err = Acquire(dir, Holder{PID: os.Getpid(), Command: "ingest", Started: time.Now()})
	if domain.KindOf(err) != domain.Conflict || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("while the child holds it: %v", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	l, err := Acquire(dir, Holder{PID: os.Getpid(), Command: "ingest", Started: time.Now()})
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	l.Release()
}
