package spool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
)

// DrainBatch hands out records oldest first, keeps exactly the ones the
// consumer did not take, frees drained segments, and goes on across them.
func TestDrainBatchPartialConsumption(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 1<<20, WithSegmentBytes(64))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 6; i++ {
		if err := s.Append([]byte(fmt.Sprintf("rec-%d-%s", i, "xxxxxxxxxxxxxxxxxxxx"))); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	take := func(k int, fail error) func([][]byte) (int, error) {
		return func(b [][]byte) (int, error) {
			n := min(k, len(b))
			for _, r := range b[:n] {
				got = append(got, string(r[:5]))
			}
			return n, fail
		}
	}
	ctx := context.Background()
	if n, err := s.DrainBatch(ctx, 10, 1<<20, take(1, nil)); n != 1 || err != nil {
		t.Fatalf("first batch: %d %v", n, err)
	}
	boom := errors.New("boom")
	if n, err := s.DrainBatch(ctx, 10, 1<<20, take(0, boom)); n != 0 || !errors.Is(err, boom) {
		t.Fatalf("failed batch: %d %v", n, err)
	}
	if s.Len() != 5 {
		t.Fatalf("Len = %d after taking 1 of 6, want 5", s.Len())
	}
	for s.Len() > 0 {
		if n, err := s.DrainBatch(ctx, 10, 1<<20, take(10, nil)); err != nil || n == 0 {
			t.Fatalf("drain: %d %v", n, err)
		}
	}
	want := []string{"rec-0", "rec-1", "rec-2", "rec-3", "rec-4", "rec-5"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	if n, err := s.DrainBatch(ctx, 10, 1<<20, take(10, nil)); n != 0 || err != nil {
		t.Fatalf("empty spool: %d %v", n, err)
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if de.Name() != ".lock" && de.Type().IsRegular() && len(de.Name()) > 4 && de.Name()[len(de.Name())-4:] == ".seg" {
			t.Errorf("segment %s left after a full drain", de.Name())
		}
	}
	if s.Size() != 0 {
		t.Errorf("Size = %d after a full drain", s.Size())
	}
}
