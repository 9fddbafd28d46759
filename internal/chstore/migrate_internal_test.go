package chstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// A migration sends an ON CLUSTER statement again only when the server's
// wait for a slow host ran out (TIMEOUT_EXCEEDED), not for other errors
// or for statements that do not go to the cluster.
func TestClusterDDLTimedOut(t *testing.T) {
	timedOut := fmt.Errorf("migrate: %w", &clickhouse.Exception{Code: 159,
		Message: "Watching task /clickhouse/task_queue/ddl/query-0000000050 is executing longer than distributed_ddl_task_timeout (=180) seconds"})
	other := &clickhouse.Exception{Code: 44, Message: "Cannot add column tier: column with this name already exists"}
	for _, tc := range []struct {
		name string
		stmt string
		err  error
		want bool
	}{
		{"on cluster, timed out", "ALTER TABLE db.affected_local ON CLUSTER kvt ADD COLUMN tier String", timedOut, true},
		{"on cluster, lower case", "create table if not exists db.t on cluster kvt (x UInt8) ENGINE = Log", timedOut, true},
		{"one server, timed out", "ALTER TABLE db.affected ADD COLUMN tier String", timedOut, false},
		{"on cluster, another error", "ALTER TABLE db.affected_local ON CLUSTER kvt ADD COLUMN tier String", other, false},
		{"on cluster, a plain error", "ALTER TABLE db.affected_local ON CLUSTER kvt ADD COLUMN tier String", errors.New("i/o timeout"), false},
		{"on cluster, no error", "ALTER TABLE db.affected_local ON CLUSTER kvt ADD COLUMN tier String", nil, false},
	} {
		if got := clusterDDLTimedOut(tc.stmt, tc.err); got != tc.want {
			t.Errorf("%s: clusterDDLTimedOut = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A migration statement is sent again while it fails in a way a resend
// mends, each kind within its own bound, and not at all otherwise.
func TestResendIdempotent(t *testing.T) {
	defer func(s, r time.Duration) { shardLockWait, reconnectWait = s, r }(shardLockWait, reconnectWait)
	shardLockWait, reconnectWait = time.Millisecond, time.Millisecond

	const alter = "ALTER TABLE db.raw_lines_local ON CLUSTER kvt ADD COLUMN source_ref UInt64 DEFAULT 0 AFTER file_digest"
	const local = "ALTER TABLE db.raw_lines ADD COLUMN source_ref UInt64 DEFAULT 0 AFTER file_digest"
	// What 18.16 answered in CI, from the host that gave up on the lock.
	busy := &clickhouse.Exception{Code: 48, Message: "There was an error on [127.0.0.1:27865]: Cannot enqueue replicated DDL query for a replicated shard"}
	unsupported := &clickhouse.Exception{Code: 48, Message: "Unsupported type of ALTER query"}
	timedOut := &clickhouse.Exception{Code: 159, Message: "Watching task /clickhouse/task_queue/ddl/query-0000000050 is executing longer than distributed_ddl_task_timeout (=180) seconds"}
	eof := errors.New("read: EOF")
	repeat := func(err error, n int) []error {
		out := make([]error, n)
		for i := range out {
			out[i] = err
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		stmt    string
		answers []error // what each send answers, in order; nil after the last
		sends   int
		wantErr error
	}{
		{"answered at once", alter, nil, 1, nil},
		{"shard lock busy, then free", alter, []error{busy, busy}, 3, nil},
		{"shard lock busy past its bound", alter, repeat(busy, shardLockRetries+1), shardLockRetries + 1, busy},
		{"shard lock busy without ON CLUSTER is not retried", local, []error{busy}, 1, busy},
		{"another NOT_IMPLEMENTED is not retried", alter, []error{unsupported}, 1, unsupported},
		{"timed out, then answered", alter, []error{timedOut}, 2, nil},
		{"timed out past its bound", alter, repeat(timedOut, clusterDDLRetries+1), clusterDDLRetries + 1, timedOut},
		// The restarted host first refuses the connection, then is
		// read-only and loses the lock: each kind keeps its own count.
		{"connection, then lock, then connection", alter, []error{eof, busy, eof, busy}, 5, nil},
		{"connection lost past its bound", local, repeat(eof, migrateReconnects+1), migrateReconnects + 1, eof},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sends, warned := 0, 0
			exec := func(_ context.Context, stmt string) error {
				if stmt != tc.stmt {
					t.Fatalf("sent %q, want %q", stmt, tc.stmt)
				}
				sends++
				if sends <= len(tc.answers) {
					return tc.answers[sends-1]
				}
				return nil
			}
			err := resendIdempotent(context.Background(), exec, tc.stmt, func(string, error) { warned++ })
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error = %v, want %v", err, tc.wantErr)
			}
			if sends != tc.sends || warned != sends-1 {
				t.Errorf("sent %d times and warned %d, want %d sends and a warning before each resend", sends, warned, tc.sends)
			}
		})
	}
}

// A canceled migration stops waiting to resend.
func TestResendIdempotentStopsWhenCanceled(t *testing.T) {
	defer func(s time.Duration) { shardLockWait = s }(shardLockWait)
	shardLockWait = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	busy := &clickhouse.Exception{Code: 48, Message: "Cannot enqueue replicated DDL query for a replicated shard"}
	err := resendIdempotent(ctx, func(context.Context, string) error { return busy },
		"ALTER TABLE db.t_local ON CLUSTER kvt ADD COLUMN x UInt8", func(string, error) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}
