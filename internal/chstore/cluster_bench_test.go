package chstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testcluster"
	"github.com/kvtrail/kvtrail/migrations"
)

// The insert-path measurement behind docs/cluster.md: the same raw_lines
// rows through the Distributed table synchronously (kvtrail's choice),
// asynchronously (18.16's default), and straight into each shard's local
// table with the client choosing the shard. Run with KVTRAIL_CLUSTER_BENCH=1.
func TestClusterInsertPaths(t *testing.T) {
	if os.Getenv("KVTRAIL_CLUSTER_BENCH") != "1" {
		t.Skip("set KVTRAIL_CLUSTER_BENCH=1 to measure the insert paths")
	}
	c := testcluster.Start(t, testcluster.Options{})
	ctx := context.Background()
	s := clusterStore(t, c, c.Addrs())
	m, _ := chstore.NewMigrator(s, migrations.FS)
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	const rows, batch = 400_000, 50_000
	line := strings.Repeat("x", 180)
	cols := "INSERT INTO %s (ts, ts_ns, node, role, log_format, source, file_digest, byte_offset, line_id, kind, rid, bootstrap_room, line)"
	fill := func(b interface {
		Append(...any) error
	}, from, to int, keep func(int) bool) {
		for i := from; i < to; i++ {
			if keep != nil && !keep(i) {
				continue
			}
			ts := time.Unix(1780000000+int64(i/100), 0)
			if err := b.Append(ts, uint64(ts.UnixNano()), fmt.Sprintf("node-%d", i%16), "decode", "sglang", "/var/log/x.log",
				"digest", uint64(i*200), uint64(i), "engine", fmt.Sprintf("rid-%d", i), uint64(i)*2654435761, line); err != nil {
				t.Fatal(err)
			}
		}
	}
	measure := func(name string, insert func(from, to int)) {
		t0 := time.Now()
		for from := 0; from < rows; from += batch {
			insert(from, from+batch)
		}
		el := time.Since(t0)
		t.Logf("%-34s %d rows in %6.2fs = %7.0f rows/s", name, rows, el.Seconds(), rows/el.Seconds())
	}
	viaDist := func(st *chstore.Store) func(from, to int) {
		return func(from, to int) {
			b, err := st.PrepareBatch(ctx, fmt.Sprintf(cols, "raw_lines"))
			if err != nil {
				t.Fatal(err)
			}
			fill(b, from, to, nil)
			if err := b.Send(); err != nil {
				t.Fatal(err)
			}
		}
	}
	measure("Distributed, insert_distributed_sync=1", viaDist(s))
	_ = s.Exec(ctx, "TRUNCATE TABLE raw_lines_local ON CLUSTER "+c.Name)

	async, err := chstore.Open(ctx, chstore.Options{Addrs: c.Addrs(), Database: "kvt", Username: "default", MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer async.Close()
	measure("Distributed, asynchronous", viaDist(async))
	t0 := time.Now()
	for {
		var n uint64
		_ = s.QueryRow(ctx, "SELECT count() FROM raw_lines").Scan(&n)
		if n >= rows {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("  (asynchronous: all rows readable %.2fs after the last insert returned)", time.Since(t0).Seconds())
	_ = s.Exec(ctx, "TRUNCATE TABLE raw_lines_local ON CLUSTER "+c.Name)

	shards := []*chstore.Store{}
	for _, a := range []string{c.Node(1, 1).Addr, c.Node(2, 1).Addr} {
		st, err := chstore.Open(ctx, chstore.Options{Addrs: []string{a}, Database: "kvt", Username: "default", MaxOpenConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		shards = append(shards, st)
	}
	measure("local tables, client picks shard", func(from, to int) {
		for k, st := range shards {
			b, err := st.PrepareBatch(ctx, fmt.Sprintf(cols, "raw_lines_local"))
			if err != nil {
				t.Fatal(err)
			}
			fill(b, from, to, func(i int) bool { return i%len(shards) == k })
			if err := b.Send(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
