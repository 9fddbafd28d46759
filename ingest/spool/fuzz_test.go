package spool_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvtrail/kvtrail/ingest/spool"
)

// FuzzRecover feeds arbitrary bytes to Open as a segment file: Open must
// not panic or fail, must leave only valid records, and a second Open must
// find nothing more to cut.
func FuzzRecover(f *testing.F) {
	dir := f.TempDir()
	s, err := spool.Open(dir, 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	for _, id := range []uint64{1, 2, 3} {
		s.Append(payload(id))
	}
	s.Close()
	seed, _ := os.ReadFile(filepath.Join(dir, "00000000000000000001.seg"))
	f.Add(seed)
	f.Add(seed[:len(seed)-1])
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000007.seg"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := spool.Open(dir, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.Drain(context.Background(), func([]byte) error { return nil })
		if err != nil {
			t.Fatalf("drain after recovery: %v", err)
		}
		s.Close()
		s, err = spool.Open(dir, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if len(s.Recovered()) != 0 || s.Len() != 0 {
			t.Fatalf("after draining %d records: cuts %v, Len %d", n, s.Recovered(), s.Len())
		}
	})
}
