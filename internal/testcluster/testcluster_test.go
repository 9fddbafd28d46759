package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
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

// A server whose DDL worker has ended (its error log says so, as 18.16's
// does) is restarted: its uptime starts again, and it answers an ON
// CLUSTER statement with the others.
func TestDDLWorkerEndedRestartsTheServer(t *testing.T) {
	c := Start(t, Options{})
	ctx := context.Background()
	n := c.Node(2, 2)
	uptime := func() (uint32, error) {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{n.Addr}})
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		var up uint32
		if err := conn.QueryRow(ctx, "SELECT uptime()").Scan(&up); err != nil {
			return 0, fmt.Errorf("%s: %w", n, err)
		}
		return up, nil
	}
	time.Sleep(5 * time.Second) // an uptime the restarted server's is below
	before, err := uptime()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(n.errLog(), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("2026.12.06 17:54:53.253753 [ 3 ] {} <Error> DDLWorker: Unexpected ZooKeeper error: Code: 999, e.displayText() = Coordination::Exception: Node exists (test)\n")
	if cerr := f.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		time.Sleep(ddlWatchEvery)
		// A server just restarted may run and still refuse or reset a
		// connection (once on a loaded CI machine): asked again.
		if n.running() {
			if up, err := uptime(); err == nil && up < before {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not restarted after its DDL worker ended (uptime %d s before)", n, before)
		}
	}
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{c.Node(1, 1).Addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS after_restart ON CLUSTER "+c.Name); err != nil {
		t.Fatalf("ON CLUSTER after the restart: %v", err)
	}
}
