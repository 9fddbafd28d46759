package chstore_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// resetProxy forwards TCP to a real ClickHouse. Once armed, it resets the
// next connection that sends a request (one containing match, when set
// before arming) — what a client sees when a server (a cluster replica)
// goes down in the middle of a query.
type resetProxy struct {
	ln     net.Listener
	target string
	match  []byte
	armed  atomic.Bool
	resets atomic.Int32
	wg     sync.WaitGroup
}

// storeThroughProxy opens a store on a fresh test database, through a
// resetProxy with one connection (so the armed reset hits the statement
// the test sends next).
func storeThroughProxy(t *testing.T) (*chstore.Store, *resetProxy) {
	t.Helper()
	o := testdb.Options(t)
	proxy := newResetProxy(t, o.Addrs[0])
	o.Addrs, o.MaxOpenConns, o.ReadTimeout = []string{proxy.ln.Addr().String()}, 1, 10*time.Second
	s, err := chstore.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, proxy
}

func newResetProxy(t *testing.T, target string) *resetProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &resetProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *resetProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.pipe(c.(*net.TCPConn)) }()
	}
}

func (p *resetProxy) pipe(c *net.TCPConn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(c, up) }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 && (p.match == nil || bytes.Contains(buf[:n], p.match)) && p.armed.CompareAndSwap(true, false) {
			p.resets.Add(1)
			_ = c.SetLinger(0) // close with RST: "connection reset by peer"
			return
		}
		if n > 0 {
			if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A connection that dies under a read costs the read nothing: it is
// retried on a new connection (in cluster mode, the next replica). This
// is what keeps an ingest going while a replica is stopped mid-query.
func TestReadsSurviveAConnectionReset(t *testing.T) {
	ctx := context.Background()
	s, proxy := storeThroughProxy(t)
	var n uint8
	proxy.armed.Store(true)
	if err := s.QueryRow(ctx, "SELECT 2").Scan(&n); err != nil || n != 2 {
		t.Fatalf("QueryRow across a reset: %v (%d)", err, n)
	}
	var rows []struct {
		N uint64 `ch:"number"`
	}
	proxy.armed.Store(true)
	if err := s.Select(ctx, &rows, "SELECT number FROM system.numbers LIMIT 3"); err != nil || len(rows) != 3 {
		t.Fatalf("Select across a reset: %v (%d rows)", err, len(rows))
	}
	proxy.armed.Store(true)
	r, err := s.Query(ctx, "SELECT number FROM system.numbers LIMIT 2")
	if err != nil {
		t.Fatalf("Query across a reset: %v", err)
	}
	r.Close()
	if got := proxy.resets.Load(); got != 3 {
		t.Fatalf("proxy reset %d connections, want 3 (the test did not exercise the failure)", got)
	}
}

// Both wire compressions round-trip a block of data: tests otherwise run
// uncompressed (auto picks none on loopback), users on remote servers LZ4.
func TestCompressionRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"lz4", "none"} {
		t.Run(mode, func(t *testing.T) {
			o := testdb.Options(t)
			o.Compression = mode
			s, err := chstore.Open(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Exec(ctx, "CREATE TABLE IF NOT EXISTS comp_rt (n UInt64, s String) ENGINE = MergeTree ORDER BY n"); err != nil {
				t.Fatal(err)
			}
			x, err := s.PrepareBatch(ctx, "INSERT INTO comp_rt (n, s)")
			if err != nil {
				t.Fatal(err)
			}
			for i := range 50_000 {
				if err := x.Append(uint64(i), "the same log text compresses well "+mode); err != nil {
					t.Fatal(err)
				}
			}
			if err := x.Send(); err != nil {
				t.Fatal(err)
			}
			var n, sum uint64
			if err := s.QueryRow(ctx, "SELECT count(), sum(n) FROM comp_rt").Scan(&n, &sum); err != nil || n != 50_000 || sum != 50_000*49_999/2 {
				t.Fatalf("read back %d rows (sum %d), %v", n, sum, err)
			}
		})
	}
}

// A read streamed to a slow consumer outlives the read timeout: clickhouse-go
// arms the timeout once per query, so through Query the same stream fails
// with "i/o timeout" (the control), through Stream it completes.
func TestStreamOutlivesReadTimeout(t *testing.T) {
	ctx := context.Background()
	s := shortReadTimeout(t)
	// More rows than the driver buffers (two blocks of 65,536), so the
	// server is still sending when the consumer comes back.
	const sql, total = "SELECT number FROM system.numbers LIMIT 2000000", 2_000_000
	read := func(rows driver.Rows) (int, error) {
		defer rows.Close()
		n := 0
		for rows.Next() {
			if n == 0 {
				time.Sleep(3 * time.Second) // longer than the read timeout
			}
			n++
		}
		return n, rows.Err()
	}
	rows, err := s.Query(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := read(rows); err == nil {
		t.Fatalf("control: Query read %d rows past the read timeout without error; the test does not exercise it", n)
	}
	rows, done, err := s.Stream(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if n, err := read(rows); err != nil || n != total {
		t.Fatalf("Stream read %d of %d rows: %v", n, total, err)
	}
}

// A DDL statement that takes longer than the read timeout completes
// through ExecDDL: an ON CLUSTER ALTER answers when every host has run it,
// which on a loaded machine took more than the 60 s read timeout. The
// slow statement is a sleep (3 s, 18.16's limit), against a 2 s read
// timeout; through Exec it fails (the control).
func TestExecDDLOutlivesReadTimeout(t *testing.T) {
	ctx := context.Background()
	s := shortReadTimeout(t)
	const slow = "SELECT sleep(3)"
	if err := s.Exec(ctx, slow); err == nil {
		t.Fatal("control: Exec outlived the read timeout; the test does not exercise it")
	}
	if err := s.ExecDDL(ctx, slow); err != nil {
		t.Fatalf("ExecDDL: %v", err)
	}
	// The caller's earlier deadline still wins.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.ExecDDL(short, slow); err == nil {
		t.Fatal("ExecDDL outlived the caller's 1 s deadline")
	}
}

// shortReadTimeout opens the test database with a 2 s read timeout (the
// least config accepts), for tests of what outlives it.
func shortReadTimeout(t *testing.T) *chstore.Store {
	t.Helper()
	o := testdb.Options(t)
	o.ReadTimeout = 2 * time.Second
	s, err := chstore.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// WithSettings adds to the settings a context already sends, where
// clickhouse-go's own replaces them; a DDL statement (ExecDDL, which adds
// its own on 18.16) keeps the caller's.
func TestWithSettingsAddsToTheCallers(t *testing.T) {
	s := testdb.New(t)
	ctx := chstore.WithSettings(context.Background(), clickhouse.Settings{"max_threads": 3})
	ctx = chstore.WithSettings(ctx, clickhouse.Settings{"max_block_size": 1234})
	read := func(name string) string {
		var v string
		if err := s.QueryRow(ctx, "SELECT value FROM system.settings WHERE name = ?", name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := [2]string{read("max_threads"), read("max_block_size")}; got != [2]string{"3", "1234"} {
		t.Fatalf("max_threads, max_block_size = %v, want [3 1234]", got)
	}
	// A DDL statement under the same context: a table created from the
	// settings it ran with holds the caller's value.
	if err := s.ExecDDL(ctx, "CREATE TABLE IF NOT EXISTS with_settings ENGINE = Memory AS SELECT value FROM system.settings WHERE name = 'max_block_size'"); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := s.QueryRow(context.Background(), "SELECT any(value) FROM with_settings").Scan(&v); err != nil || v != "1234" {
		t.Fatalf("the DDL statement ran with max_block_size %q (%v), want 1234", v, err)
	}
}
