// Package testdb gives tests a real ClickHouse: each call gets its own fresh
// database on a server shared by the whole test process. The server is the
// one named by KVTRAIL_TEST_CLICKHOUSE_ADDR (the test script starts one for
// the whole `go test` run), or else a private clickhouse-server this package
// starts once per test binary.
//
// When KVTRAIL_REQUIRE_CLICKHOUSE=1 (CI sets it) a missing server fails the
// test; otherwise it is skipped with the reason.
//
// Every statement a test's store sends is also parsed with the modern
// ClickHouse grammar (internal/sqlcheck), so SQL that only 18.16 accepts
// fails here; with KVT_SQL_CAPTURE set, every statement the server
// accepted is also recorded (internal/sqlcapture) for the replay on
// ClickHouse 26.7 (internal/chdbtier).
package testdb

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/chlocal"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/sqlcapture"
	"github.com/kvtrail/kvtrail/internal/sqlcheck"
	"github.com/kvtrail/kvtrail/migrations"
)

// Environment variables the harness reads.
const (
	EnvAddr    = "KVTRAIL_TEST_CLICKHOUSE_ADDR"
	EnvRequire = "KVTRAIL_REQUIRE_CLICKHOUSE"
)

var (
	once     sync.Once
	addr     string
	server   *chlocal.Server
	startErr error
	dbSeq    atomic.Int64
)

// Main runs a package's tests, then cleanup (what the package made for
// all its tests: a built binary, a simulation), and stops the private
// server. Use it from TestMain; without it the server still dies with the
// test binary.
func Main(m *testing.M, cleanup ...func()) {
	code := m.Run()
	for _, c := range cleanup {
		c()
	}
	Shutdown()
	os.Exit(code)
}

// Shutdown stops the private server, if this package started one. For a
// TestMain that has more to tear down than Main does.
func Shutdown() {
	if server != nil {
		server.Stop()
		_ = os.RemoveAll(server.Dir())
		server = nil
	}
}

// Addr returns the shared server's native address, starting it if needed.
func Addr(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if a := os.Getenv(EnvAddr); a != "" {
			addr = a
			return
		}
		dir, err := os.MkdirTemp("", "kvtrail-testch-")
		if err != nil {
			startErr = err
			return
		}
		server, startErr = chlocal.Start(context.Background(), chlocal.Options{
			Binary: "clickhouse-server", Dir: filepath.Join(dir, "ch"), StartTimeout: 60 * time.Second,
		})
		if startErr == nil {
			addr = server.Addr
		}
	})
	if startErr != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("ClickHouse is required (%s=1) but unavailable: %v", EnvRequire, startErr)
		}
		t.Skipf("no ClickHouse for this test (set %s or install clickhouse-server): %v", EnvAddr, startErr)
	}
	return addr
}

// Options returns store options for a new, uniquely named database that is
// dropped when the test ends. Statements are checked against the modern
// grammar.
func Options(t testing.TB) chstore.Options {
	t.Helper()
	a := Addr(t)
	db := fmt.Sprintf("kvt_test_%d_%d", os.Getpid(), dbSeq.Add(1))
	var done atomic.Bool
	t.Cleanup(func() {
		done.Store(true)
		s, err := chstore.Open(context.Background(), chstore.Options{
			Addrs: []string{a}, Database: "default", Username: "default",
			DialTimeout: 5 * time.Second, ReadTimeout: 60 * time.Second, MaxOpenConns: 1,
		})
		if err == nil {
			_ = s.DropDatabase(context.Background(), db)
			_ = s.Close()
		}
	})
	return chstore.Options{
		Addrs: []string{a}, Database: db, Username: "default",
		DialTimeout: 5 * time.Second, ReadTimeout: 60 * time.Second, MaxOpenConns: 16,
		OnStatement: func(sql string) {
			if done.Load() {
				return
			}
			if err := sqlcheck.Check(sql); err != nil {
				t.Errorf("statement sent to ClickHouse fails the modern grammar: %v", err)
			}
		},
		OnResult: func(sql string, args []any, tables []sqlcapture.Table, err error) {
			if err != nil || done.Load() {
				return
			}
			if err := sqlcapture.Record(t.Name(), db, sql, args, tables...); err != nil {
				t.Errorf("capture statement for the modern-engine replay: %v", err)
			}
		},
	}
}

// Empty opens a store on a fresh database without any migrations.
func Empty(t testing.TB) *chstore.Store {
	t.Helper()
	s, err := chstore.Open(context.Background(), Options(t))
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// New opens a store on a fresh database with kvtrail's schema applied.
func New(t testing.TB) *chstore.Store {
	t.Helper()
	s := Empty(t)
	m, err := chstore.NewMigrator(s, migrations.FS)
	if err != nil {
		t.Fatalf("load migrations: %v", err)
	}
	if _, err := m.Up(context.Background()); err != nil {
		t.Fatalf("migrate test database: %v", err)
	}
	return s
}

// NotClickHouse listens on loopback and answers every connection with
// greeting, which is not the native protocol, then closes it; it returns
// the address.
func NotClickHouse(t testing.TB, greeting string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(greeting))
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}
