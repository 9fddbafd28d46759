package chstore

import (
	"errors"
	"fmt"
	"testing"

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
