package chstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/migrations"
)

// BenchmarkScanEngineEvents reads 200,000 engine lines (half received,
// half finished, on four nodes) as a slice of the analysis does, a block
// at a time and, for the baseline in the same run, row by row through the
// driver (RowReads): the client's cost of a line, which the analysis pays
// for every line of the window.
func BenchmarkScanEngineEvents(b *testing.B) {
	const n = 200_000
	ctx := context.Background()
	t0 := anT0.Unix()
	stores := benchStores(b, fmt.Sprintf(`INSERT INTO engine_events (ts, ts_ns, node, role, dp_rank, event, rid, bootstrap_room,
 prompt_tokens, completion_tokens, cached_tokens, finish_type, finish_message, status_code, line_id, ingested_at)
SELECT toDateTime(%[1]d + intDiv(number, 100)), toUInt64(%[1]d000000000 + number * 10000000),
 concat('decode-', toString(number %% 4)), if(number %% 2 = 0, 'prefill', 'decode'), toInt16(number %% 4),
 if(number %% 2 = 0, 'received', 'finished'), hex(cityHash64(intDiv(number, 2))), intDiv(number, 2) + 1,
 800 + number %% 100, number %% 97, 0, if(number %% 2 = 1, 'length', ''), '', 200, number + 1, now()
FROM system.numbers LIMIT %[2]d`, t0, n))
	to := anT0.Add(n / 100 * 1e9)
	benchReads(b, stores, n, "line", func(s *chstore.Store) (int, error) {
		got := 0
		err := s.ScanEngineEvents(ctx, anT0, to, func(*domain.EngineEvent) error {
			got++
			return nil
		})
		return got, err
	})
}

// BenchmarkScanPageEvents reads 20,000 page events of 64 pages each both
// ways in one run: the block path against the driver's rows, whose scan
// converts each page of an Array(UInt32) by reflection.
func BenchmarkScanPageEvents(b *testing.B) {
	const n, pages = 20_000, 64
	ctx := context.Background()
	t0 := anT0.Unix()
	stores := benchStores(b, fmt.Sprintf(`INSERT INTO page_events (ts, ts_ns, node, dp_rank, event, rid, bootstrap_room, pages, line_id, ingested_at)
SELECT toDateTime(%[1]d + intDiv(number, 100)), toUInt64(%[1]d000000000 + number * 10000000),
 concat('decode-', toString(number %% 4)), toInt16(number %% 2), if(number %% 2 = 0, 'write', 'read'),
 hex(cityHash64(intDiv(number, 2))), intDiv(number, 2) + 1,
 arrayMap(x -> toUInt32(number * %[3]d + x), range(%[3]d)), number + 1, now()
FROM system.numbers LIMIT %[2]d`, t0, n, pages))
	to := anT0.Add(n / 100 * 1e9)
	benchReads(b, stores, n*pages, "page", func(s *chstore.Store) (int, error) {
		got := 0
		err := s.ScanPageEvents(ctx, anT0, to, func(e *domain.PageEvent) error {
			got += len(e.Pages)
			return nil
		})
		return got, err
	})
}

type benchStore struct {
	name string
	s    *chstore.Store
}

// benchStores migrates a fresh database, fills it with insert, and returns
// a store on the block path and one reading rows through the driver
// (RowReads): the two sides of a read benchmark's comparison.
func benchStores(b *testing.B, insert string) []benchStore {
	b.Helper()
	ctx := context.Background()
	o := testdb.Options(b)
	s := openStore(b, o)
	m, err := chstore.NewMigrator(s, migrations.FS)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		b.Fatal(err)
	}
	if err := s.Exec(ctx, insert); err != nil {
		b.Fatal(err)
	}
	ro := o
	ro.RowReads = true
	return []benchStore{{"blocks", s}, {"rows", openStore(b, ro)}}
}

// benchReads runs read on each store as a sub-benchmark; read returns how
// many units (lines, pages) it saw, which must be want, and the time is
// reported per unit.
func benchReads(b *testing.B, stores []benchStore, want int, unit string, read func(*chstore.Store) (int, error)) {
	for _, c := range stores {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, err := read(c.s)
				if err != nil {
					b.Fatal(err)
				}
				if got != want {
					b.Fatalf("read %d %ss, want %d", got, unit, want)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*want), "ns/"+unit)
		})
	}
}
