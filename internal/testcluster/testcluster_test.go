package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// The cluster comes up with its macros and every host sees all four in
// system.clusters.
func TestClusterStarts(t *testing.T) {
	t0 := time.Now()
	c := Start(t, Options{})
	t.Logf("ZooKeeper + %d servers ready in %s", len(c.Nodes), time.Since(t0))
	for _, n := range c.Nodes {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{n.Addr}})
		if err != nil {
			t.Fatal(err)
		}
		var hosts uint64
		if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.clusters WHERE cluster = ?", c.Name).Scan(&hosts); err != nil {
			t.Fatal(err)
		}
		var shard string
		if err := conn.QueryRow(context.Background(), "SELECT substitution FROM system.macros WHERE macro = 'shard'").Scan(&shard); err != nil {
			t.Fatal(err)
		}
		_ = conn.Close()
		if hosts != 4 || shard == "" {
			t.Errorf("%s: %d hosts in system.clusters, shard macro %q", n, hosts, shard)
		}
	}
}
