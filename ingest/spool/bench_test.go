package spool_test

import (
	"fmt"
	"testing"

	"github.com/kvtrail/kvtrail/ingest/spool"
)

// BenchmarkAppend measures durable appends of 64 KiB batches (a typical
// compressed push), from one goroutine and from many; the parallel case
// shows what group commit buys. The numbers depend on the disk's fsync
// latency far more than on this code.
func BenchmarkAppend(b *testing.B) {
	batch := make([]byte, 64<<10)
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			s, err := spool.Open(b.TempDir(), 1<<40)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetBytes(int64(len(batch)))
			b.SetParallelism(par) // par × GOMAXPROCS goroutines
			if par == 1 {
				for b.Loop() {
					if err := s.Append(batch); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Append(batch); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
