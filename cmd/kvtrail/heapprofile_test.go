package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

// sink keeps what the heap-profile test allocates reachable until it lets go.
var sink [][]byte

//go:noinline
func fillSink(chunks int) {
	for range chunks {
		sink = append(sink, make([]byte, 1<<20))
	}
}

// TestHeapProfileIsOfThePeakLiveHeap: the profile --heapprofile leaves is
// taken when the live heap peaked, not when the heap's objects, garbage
// included, did. Here garbage comes first (256 MB, never collected while
// the sampler looks), then 64 MB held live: the profile must show the
// 64 MB. Sampling the heap's objects kept the garbage's sample as the peak
// and left a profile without them; writing the profile as soon as the live
// figure moved left one a collection old about one run in six.
func TestHeapProfileIsOfThePeakLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	path := filepath.Join(t.TempDir(), "heap.prof")
	runtime.GC()
	stopOnce, err := startPeakHeapProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceValue(stopOnce)
	defer stop() // on a failed wait too
	waitRewritten(t, path, "the first sample")
	fillSink(256)
	sink = nil // garbage, uncollected: GC is off
	time.Sleep(300 * time.Millisecond)
	runtime.GC()
	fillSink(64)
	runtime.GC() // marks the 64 MB live
	waitRewritten(t, path, "the live heap's growth to 64 MB")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	sink = nil
	out, err := exec.Command("go", "tool", "pprof", "-sample_index=inuse_space", "-top", path).CombinedOutput()
	if err != nil {
		t.Fatalf("pprof: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "fillSink") {
			continue
		}
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasSuffix(f[0], "MB") {
			var mb float64
			if _, err := fmt.Sscan(strings.TrimSuffix(f[0], "MB"), &mb); err == nil && mb >= 32 {
				return
			}
		}
		t.Fatalf("the profile holds too little of the live peak: %q\n%s", line, out)
	}
	t.Fatalf("the profile does not hold the live peak's allocations:\n%s", out)
}

// waitRewritten waits (up to 10 s, for a loaded machine) until the
// profiler replaces path with a new file, as it does for each peak.
func waitRewritten(t *testing.T, path, after string) {
	t.Helper()
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if now, err := os.Stat(path); err == nil && !os.SameFile(before, now) {
			return
		}
	}
	t.Fatalf("no profile written after %s", after)
}
