package spool_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kvtrail/kvtrail/ingest/spool"
)

// payload returns a deterministic record for id, of varying length, so a
// record can be checked byte for byte after recovery.
func payload(id uint64) []byte {
	n := 8 + int(id%97)
	b := make([]byte, n)
	binary.LittleEndian.PutUint64(b, id)
	for i := 8; i < n; i++ {
		b[i] = byte(id*31 + uint64(i))
	}
	return b
}

// idOf checks b is payload(id) for some id and returns it.
func idOf(tb testing.TB, b []byte) uint64 {
	tb.Helper()
	if len(b) < 8 {
		tb.Fatalf("record of %d bytes", len(b))
	}
	id := binary.LittleEndian.Uint64(b)
	if !bytes.Equal(b, payload(id)) {
		tb.Fatalf("record for id %d is corrupt", id)
	}
	return id
}

func MustOpen(tb testing.TB, dir string, maxBytes int64, opts ...spool.Option) *spool.Spool {
	tb.Helper()
	s, err := spool.Open(dir, maxBytes, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func mustAppend(tb testing.TB, s *spool.Spool, ids ...uint64) {
	tb.Helper()
	for _, id := range ids {
		if err := s.Append(payload(id)); err != nil {
			tb.Fatalf("append %d: %v", id, err)
		}
	}
}

// drainAll drains everything and returns the ids in delivery order.
func drainAll(tb testing.TB, s *spool.Spool) []uint64 {
	tb.Helper()
	var got []uint64
	if _, err := s.Drain(context.Background(), func(b []byte) error {
		got = append(got, idOf(tb, b))
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	return got
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func segments(tb testing.TB, dir string) []string {
	tb.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestOrderAndAtLeastOnce(t *testing.T) {
	dir := t.TempDir()
	s := MustOpen(t, dir, 1<<20, spool.WithSegmentBytes(1024))
	mustAppend(t, s, seq(0, 100)...)
	if s.Len() != 100 || len(segments(t, dir)) < 5 {
		t.Fatalf("Len = %d, %d segments; want 100 records over several segments", s.Len(), len(segments(t, dir)))
	}
	sizeBefore := s.Size()

	boom := errors.New("clickhouse down")
	var got []uint64
	n, err := s.Drain(context.Background(), func(b []byte) error {
		id := idOf(t, b)
		if id == 37 {
			return boom
		}
		got = append(got, id)
		return nil
	})
	if n != 37 || !errors.Is(err, boom) {
		t.Fatalf("Drain = %d, %v; want 37, %v", n, err, boom)
	}
	if !slices.Equal(got, seq(0, 37)) {
		t.Fatalf("delivered %v", got)
	}
	if s.Len() != 63 || s.Size() >= sizeBefore {
		t.Fatalf("after partial drain Len = %d, Size = %d (was %d); want 63 and fully drained segments deleted", s.Len(), s.Size(), sizeBefore)
	}
	// The failed record is first in the next drain; nothing before it is
	// delivered again within the same process.
	if got := drainAll(t, s); !slices.Equal(got, seq(37, 100)) {
		t.Fatalf("second drain delivered %v", got)
	}
	if s.Len() != 0 || s.Size() != 0 || len(segments(t, dir)) != 0 {
		t.Fatalf("after full drain Len = %d, Size = %d, segments %v", s.Len(), s.Size(), segments(t, dir))
	}
	// Appending after a full drain (which closed the active segment) works.
	mustAppend(t, s, 100, 101)
	if got := drainAll(t, s); !slices.Equal(got, []uint64{100, 101}) {
		t.Fatalf("drain after re-append delivered %v", got)
	}
}

func TestPartlyDrainedSegmentIsRedeliveredAfterRestart(t *testing.T) {
	dir := t.TempDir()
	s := MustOpen(t, dir, 1<<20)
	mustAppend(t, s, seq(0, 10)...)
	s.Drain(context.Background(), func(b []byte) error {
		if idOf(t, b) == 4 {
			return errors.New("fail")
		}
		return nil
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = MustOpen(t, dir, 1<<20)
	if s.Len() != 10 {
		t.Fatalf("Len = %d, want 10 (whole segment counts again)", s.Len())
	}
	if got := drainAll(t, s); !slices.Equal(got, seq(0, 10)) {
		t.Fatalf("delivered %v, want 0..9 again (at least once)", got)
	}
}

func TestErrFull(t *testing.T) {
	dir := t.TempDir()
	frame := int64(8 + len(payload(0))) // header + payload
	s := MustOpen(t, dir, 3*frame)
	mustAppend(t, s, 0, 97, 194) // ids with equal payload length
	err := s.Append(payload(291))
	if !errors.Is(err, spool.ErrFull) {
		t.Fatalf("err = %v, want ErrFull", err)
	}
	for _, want := range []string{fmt.Sprint(3 * frame), "current size"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if s.Size() != 3*frame || s.Len() != 3 {
		t.Fatalf("a refused append changed the spool: Size %d Len %d", s.Size(), s.Len())
	}
	drainAll(t, s)
	mustAppend(t, s, 291) // room again after draining
}

func TestReopenAfterClose(t *testing.T) {
	dir := t.TempDir()
	s := MustOpen(t, dir, 1<<20, spool.WithSegmentBytes(512))
	mustAppend(t, s, seq(0, 50)...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(payload(1)); !errors.Is(err, spool.ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	s = MustOpen(t, dir, 1<<20, spool.WithSegmentBytes(512))
	if cuts := s.Recovered(); len(cuts) != 0 {
		t.Fatalf("clean reopen cut %+v", cuts)
	}
	mustAppend(t, s, seq(50, 60)...)
	if got := drainAll(t, s); !slices.Equal(got, seq(0, 60)) {
		t.Fatalf("delivered %v", got)
	}
}

func TestSecondOpenIsRefused(t *testing.T) {
	dir := t.TempDir()
	MustOpen(t, dir, 1<<20)
	if s, err := spool.Open(dir, 1<<20); err == nil {
		s.Close()
		t.Fatal("second Open of the same directory succeeded")
	}
}

// TestRecovery damages the last or a middle record of a segment and checks
// that Open keeps every record before the damage and reports the cut.
func TestRecovery(t *testing.T) {
	for _, tc := range []struct {
		name       string
		damage     func(t *testing.T, path string, size int64)
		wantReason string
		wantIDs    []uint64
	}{
		{"torn payload", truncateBy(3), "partial record", seq(0, 19)},
		{"torn header", func(t *testing.T, p string, size int64) {
			truncateBy(0)(t, p, size)
			appendBytes(t, p, []byte{1, 2, 3, 4, 5})
		}, "partial record header", seq(0, 20)},
		{"corrupt checksum in the middle", flipByteAt(func(size int64) int64 { return size / 2 }), "checksum mismatch", nil},
		{"garbage length", func(t *testing.T, p string, size int64) {
			appendBytes(t, p, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1})
		}, "record length out of range", seq(0, 20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := MustOpen(t, dir, 1<<20)
			mustAppend(t, s, seq(0, 20)...)
			s.Close()
			segs := segments(t, dir)
			if len(segs) != 1 {
				t.Fatalf("segments %v", segs)
			}
			fi, _ := os.Stat(segs[0])
			tc.damage(t, segs[0], fi.Size())

			s = MustOpen(t, dir, 1<<20)
			cuts := s.Recovered()
			if len(cuts) != 1 || cuts[0].Reason != tc.wantReason || cuts[0].Bytes <= 0 || cuts[0].Segment != filepath.Base(segs[0]) {
				t.Fatalf("Recovered() = %+v, want one cut for %q", cuts, tc.wantReason)
			}
			t.Logf("cut: %+v", cuts[0])
			if fi, _ := os.Stat(segs[0]); fi.Size() != cuts[0].Offset {
				t.Errorf("segment is %d bytes, want truncated to %d", fi.Size(), cuts[0].Offset)
			}
			mustAppend(t, s, 1000)
			got := drainAll(t, s)
			want := tc.wantIDs
			if want == nil { // a middle corruption: a prefix survives
				want = seq(0, uint64(len(got)-1))
				if len(got) < 2 || len(got) > 15 {
					t.Fatalf("delivered %v, want a prefix of 0..19", got)
				}
			}
			if !slices.Equal(got, append(want, 1000)) {
				t.Fatalf("delivered %v, want %v then 1000", got, want)
			}
			// The repair is durable: a further reopen finds nothing to cut.
			s.Close()
			if s = MustOpen(t, dir, 1<<20); len(s.Recovered()) != 0 {
				t.Fatalf("second reopen cut %+v", s.Recovered())
			}
		})
	}
}

// TestCorruptionIsConfinedToItsSegment checks that damage in one segment
// does not cost records in later ones.
func TestCorruptionIsConfinedToItsSegment(t *testing.T) {
	dir := t.TempDir()
	s := MustOpen(t, dir, 1<<20, spool.WithSegmentBytes(1024))
	mustAppend(t, s, seq(0, 60)...)
	s.Close()
	segs := segments(t, dir)
	if len(segs) < 3 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	// Record 0 is bytes 0-15 (an 8-byte payload); byte 20 is in record 1.
	flipByteAt(func(int64) int64 { return 20 })(t, segs[0], 0)

	s = MustOpen(t, dir, 1<<20, spool.WithSegmentBytes(1024))
	if cuts := s.Recovered(); len(cuts) != 1 || cuts[0].Offset != 16 || cuts[0].Segment != filepath.Base(segs[0]) {
		t.Fatalf("Recovered() = %+v", cuts)
	}
	got := drainAll(t, s)
	if len(got) < 2 || got[0] != 0 || got[1] == 1 || got[len(got)-1] != 59 || !slices.IsSorted(got) {
		t.Fatalf("delivered %v, want record 0, then the later segments in order", got)
	}
}

func TestConcurrentAppendAndDrain(t *testing.T) {
	const writers, perWriter = 8, 150
	s := MustOpen(t, t.TempDir(), 64<<20, spool.WithSegmentBytes(4096))
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu  sync.Mutex
		got []uint64
	)
	drained := make(chan struct{})
	go func() { // one drainer, running alongside the writers
		defer close(drained)
		for ctx.Err() == nil {
			s.Drain(ctx, func(b []byte) error {
				mu.Lock()
				got = append(got, idOf(t, b))
				mu.Unlock()
				return nil
			})
		}
	}()
	var wg sync.WaitGroup
	for w := range uint64(writers) {
		wg.Go(func() {
			for i := range uint64(perWriter) {
				if err := s.Append(payload(w<<32 | i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	cancel()
	<-drained
	got = append(got, drainAll(t, s)...)

	if len(got) != writers*perWriter {
		t.Fatalf("delivered %d records, want %d", len(got), writers*perWriter)
	}
	// Each writer's records must come out in the order it appended them.
	next := make([]uint64, writers)
	for _, id := range got {
		w, i := id>>32, id&0xffffffff
		if i != next[w] {
			t.Fatalf("writer %d: got record %d, want %d", w, i, next[w])
		}
		next[w]++
	}
	if s.Len() != 0 || s.Size() != 0 {
		t.Fatalf("Len %d Size %d after draining everything", s.Len(), s.Size())
	}
}

func truncateBy(n int64) func(*testing.T, string, int64) {
	return func(t *testing.T, p string, size int64) {
		if err := os.Truncate(p, size-n); err != nil {
			t.Fatal(err)
		}
	}
}

func flipByteAt(off func(size int64) int64) func(*testing.T, string, int64) {
	return func(t *testing.T, p string, size int64) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[off(int64(len(b)))] ^= 0x40
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func appendBytes(t *testing.T, p string, b []byte) {
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}
