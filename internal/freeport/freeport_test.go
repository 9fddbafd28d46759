package freeport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestPick(t *testing.T) {
	tests := []struct {
		name           string
		content        string // "" = no such file
		wantLo, wantHi int    // 0, 0: a kernel-assigned port
	}{
		{"below the ephemeral range", "32768\t60999\n", 16384, 32768},
		{"a lowered range", "20000 60999", 10000, 20000},
		{"range starting too low", "1024 65535", 0, 0},
		{"unreadable", "", 0, 0},
		{"garbage", "x y", 0, 0},
	}
	old := rangeFile
	t.Cleanup(func() { rangeFile = old })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rangeFile = filepath.Join(t.TempDir(), "range")
			if tc.content != "" {
				if err := os.WriteFile(rangeFile, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			p, err := Pick()
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantHi != 0 && (p < tc.wantLo || p >= tc.wantHi) {
				t.Errorf("port %d outside [%d, %d)", p, tc.wantLo, tc.wantHi)
			}
			// The port is free: a server can bind it.
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Fatalf("picked port %d cannot be bound: %v", p, err)
			}
			_ = l.Close()
		})
	}
}

// A port something listens on is never picked: of a two-port range with
// one held, the other is returned every time.
func TestPickInSkipsListeningPorts(t *testing.T) {
	for lo := 24000; lo < 30000; lo += 2 {
		held, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(lo)))
		if err != nil {
			continue
		}
		if !free(lo + 1) {
			_ = held.Close()
			continue
		}
		defer held.Close()
		for i := 0; i < 20; i++ {
			p, ok := pickIn(lo, lo+2, 64, nil)
			if !ok || p != lo+1 {
				t.Fatalf("pickIn(%d, %d) = %d, %v; want %d (%d is held)", lo, lo+2, p, ok, lo+1, lo)
			}
		}
		if p, ok := pickIn(lo, lo+1, 8, nil); ok {
			t.Fatalf("pickIn over the held port alone returned %d", p)
		}
		return
	}
	t.Fatal("no two adjacent free ports in 24000-30000 to test with")
}

// Ports picked before any is bound are all different, on either path: a
// cluster picks a dozen before its first server starts.
func TestPickNeverRepeats(t *testing.T) {
	old := rangeFile
	t.Cleanup(func() { rangeFile = old })
	for _, tc := range []struct{ name, content string }{
		// The smallest accepted start: 500 picks of [4096, 8192) would
		// repeat by chance (birthday) without the record of given ports.
		{"below the ephemeral range", "8192 60999"},
		{"kernel-assigned", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rangeFile = filepath.Join(t.TempDir(), "range")
			if tc.content != "" {
				if err := os.WriteFile(rangeFile, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			seen := map[int]bool{}
			for i := 0; i < 500; i++ {
				p, err := Pick()
				if err != nil {
					t.Fatal(err)
				}
				if seen[p] {
					t.Fatalf("pick %d returned port %d again", i, p)
				}
				seen[p] = true
			}
		})
	}
}

// pickIn skips the ports it is told are taken.
func TestPickInSkipsTaken(t *testing.T) {
	for lo := 24000; lo < 30000; lo += 2 {
		if !free(lo) || !free(lo+1) {
			continue
		}
		for i := 0; i < 20; i++ {
			if p, ok := pickIn(lo, lo+2, 64, map[int]bool{lo: true}); !ok || p != lo+1 {
				t.Fatalf("pickIn(%d, %d) with %d taken = %d, %v; want %d", lo, lo+2, lo, p, ok, lo+1)
			}
		}
		return
	}
	t.Fatal("no two adjacent free ports in 24000-30000 to test with")
}
