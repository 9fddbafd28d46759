package testcluster

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// The cluster comes up with its macros and every host sees all four in
// system.clusters, also when a port picked for it is taken before its
// server binds it (the first attempt's port of one server is held here).
func TestClusterStarts(t *testing.T) {
	attempts := 0
	portsPicked = func(attempt int, tcp []int) {
		attempts = attempt
		if attempt == 1 {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp[2])))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
		}
	}
	t.Cleanup(func() { portsPicked = nil })
	t0 := time.Now()
	c := Start(t, Options{})
	t.Logf("ZooKeeper + %d servers ready in %s, attempt %d", len(c.Nodes), time.Since(t0), attempts)
	// The held port makes the first attempt fail; a later one may also
	// meet a port taken by another test process (rare since ports are
	// picked below the ephemeral range), which the retry is for too.
	if attempts < 2 {
		t.Errorf("servers started at attempt %d, want a later one (the first found a port taken)", attempts)
	}
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
