package ingest

import (
	"testing"
	"time"
)

// BenchmarkDecodeSpooledPush: decoding one spooled push record (the drain's
// per-record cost).
func BenchmarkDecodeSpooledPush(b *testing.B) {
	rec := encodeRecord(time.Unix(1, 0), recordEntries())
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if _, err := decodeRecord(rec); err != nil {
			b.Fatal(err)
		}
	}
}
