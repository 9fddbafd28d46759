package spool_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest/spool"
)

const (
	envCrashDir   = "KVTRAIL_SPOOL_CRASH_DIR"
	envCrashRound = "KVTRAIL_SPOOL_CRASH_ROUND"
	crashWriters  = 4
	crashSegBytes = 32 << 10 // small, so kills also land around rotations
)

// TestCrashChild is the child side of TestCrash; it does nothing unless
// started by it. It appends forever from several goroutines and records an
// id in acked.log only after Append returned nil for it.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(envCrashDir)
	if dir == "" {
		t.Skip("helper process for TestCrash")
	}
	round, _ := strconv.ParseUint(os.Getenv(envCrashRound), 10, 64)
	s, err := spool.Open(filepath.Join(dir, "spool"), 1<<30, spool.WithSegmentBytes(crashSegBytes))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	// O_APPEND writes of one short line are atomic, and a SIGKILL does not
	// lose written page cache, so no fsync is needed for the ack log.
	acks, err := os.OpenFile(filepath.Join(dir, "acked.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		os.Exit(2)
	}
	var wg sync.WaitGroup
	for w := range uint64(crashWriters) {
		wg.Go(func() {
			for i := uint64(0); ; i++ {
				id := round<<48 | w<<40 | i
				if err := s.Append(payload(id)); err != nil {
					fmt.Fprintln(os.Stderr, "child append:", err)
					os.Exit(2)
				}
				fmt.Fprintf(acks, "%d\n", id)
			}
		})
	}
	wg.Wait()
}

// TestCrash kills a writing process with SIGKILL several times, reopening
// the spool in between, and checks that every acknowledged record survived
// intact and in per-writer order.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	const rounds = 3
	for round := 1; round <= rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
		cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashRound+"="+strconv.Itoa(round))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		before := len(readAcks(t, dir))
		// Let the child write for a while, then kill it mid-stream.
		deadline := time.Now().Add(5 * time.Second)
		for len(readAcks(t, dir)) < before+500 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Duration(round*7) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: child did not die by the signal: %v\n%s", round, err, stderr.String())
		}
		if n := len(readAcks(t, dir)) - before; n < 100 {
			t.Fatalf("round %d: child acknowledged only %d records\n%s", round, n, stderr.String())
		}
	}

	acked := readAcks(t, dir)
	s := MustOpen(t, filepath.Join(dir, "spool"), 1<<30, spool.WithSegmentBytes(crashSegBytes))
	t.Logf("%d records acknowledged over %d kills; %d in spool; recovery cut %+v", len(acked), rounds, s.Len(), s.Recovered())
	present := map[uint64]bool{}
	last := map[uint64]uint64{}         // writer (round, w) -> last index seen
	for _, id := range drainAll(t, s) { // drainAll checks every payload
		if present[id] {
			t.Fatalf("record %x delivered twice", id)
		}
		present[id] = true
		wr, i := id>>40, id&(1<<40-1)
		if prev, ok := last[wr]; ok && i != prev+1 {
			t.Fatalf("writer %x: record %d follows %d", wr, i, prev)
		}
		last[wr] = i
	}
	for _, id := range acked {
		if !present[id] {
			t.Fatalf("acknowledged record %x lost", id)
		}
	}
}

// readAcks returns the ids in acked.log, ignoring a final line cut short.
func readAcks(t *testing.T, dir string) []uint64 {
	b, err := os.ReadFile(filepath.Join(dir, "acked.log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, err := strconv.ParseUint(sc.Text(), 10, 64)
		if err != nil {
			t.Fatalf("acked.log: %v", err)
		}
		ids = append(ids, id)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		ids = ids[:len(ids)-1]
	}
	return ids
}
