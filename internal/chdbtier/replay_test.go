//go:build chdb

package chdbtier

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"

	"github.com/kvtrail/kvtrail/internal/chdbstore"
	"github.com/kvtrail/kvtrail/internal/sqlcapture"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// EnvReplay names the capture file the main suite wrote
// (sqlcapture.Env); scripts/test.sh sets it for this tier.
const EnvReplay = "KVT_SQL_REPLAY"

var (
	databaseDDL = regexp.MustCompile(`(?i)^\s*(CREATE|DROP)\s+DATABASE\b`)
	createPlain = regexp.MustCompile(`(?i)^\s*CREATE\s+TABLE\s+([A-Za-z0-9_.]+)\s`)
	addColumn   = regexp.MustCompile(`(?i)^\s*ALTER\s+TABLE\s+\S+(\s+ON\s+CLUSTER\s+\S+)?\s+ADD\s+COLUMN\b`)
	// localTable is a cluster layout's local table (raw_lines_local).
	localTable = regexp.MustCompile(`\b[a-z_]+_local\b`)
)

// Every statement ClickHouse 18.16 accepted during the test suite runs on
// ClickHouse 26.7 too, against the schema kvtrail creates there.
//
// How the replay stays meaningful:
//   - statements are bound as the driver sent them (internal/chbind), so
//     the literals and their types are the real ones;
//   - every test's database is renamed to one database, migrated first with
//     the modern rendering, and statements run in the order they were sent
//     (per test process), so tables that tests create exist when used;
//   - CREATE TABLE without IF NOT EXISTS (the migration lock) is preceded by
//     a DROP TABLE IF EXISTS: 18.16 accepted it because the table was
//     absent then.
//
// Left out, with the reason:
//   - CREATE/DROP DATABASE: every test database maps to the replay
//     database, which must survive to the end;
//   - the rows of batch inserts: the capture sees the INSERT's column list,
//     not the rows, so "INSERT INTO t (cols)" is checked by preparing the
//     same batch (the columns must exist with insertable types); rows go
//     through the batch path in TestAnalysisEqualsLegacy;
//   - more than three statements of one shape (literals blanked) per test
//     process: they differ only in values;
//   - statements on a cluster layout's local tables (raw_lines_local) sent
//     to one host: the replay schema is the single-server layout; the
//     local tables' DDL runs in TestMigrationsOnModernEngine.
//
// A migration's ADD COLUMN replayed on the migrated schema meets its column
// already there; the migrator tolerates that (18.16 has no ADD COLUMN IF
// NOT EXISTS), and so does the replay.
func TestReplayCapturedStatements(t *testing.T) {
	path := os.Getenv(EnvReplay)
	if path == "" {
		if os.Getenv(testdb.EnvRequire) == "1" {
			t.Fatalf("%s is not set: scripts/test.sh sets it to the statements the suite captured", EnvReplay)
		}
		t.Skipf("%s not set (scripts/test.sh sets it after the main suite)", EnvReplay)
	}
	stmts := readCapture(t, path)
	if len(stmts) == 0 {
		t.Fatalf("%s holds no statements: the capture did not run", path)
	}
	s, err := eng.Open(sqlcapture.ReplayDatabase)
	if err != nil {
		t.Fatal(err)
	}
	migrate(t, s, s.Layout())
	st := replay(context.Background(), s, stmts)
	for _, f := range st.failures {
		t.Error(f)
	}
	t.Logf("%d captured statements: %d executed, %d batch inserts prepared, %d skipped (database DDL, cluster-local tables), %d failed",
		len(stmts), st.ran, st.batches, st.skipped, len(st.failures))
}

type replayStats struct {
	ran, batches, skipped int
	failures              []string
}

// replay runs captured statements in order on s (see above for what is
// left out and why).
func replay(ctx context.Context, s *chdbstore.Store, stmts []sqlcapture.Captured) replayStats {
	var st replayStats
	// Tables the captured statements create without IF NOT EXISTS (the
	// migration lock): a later statement on one is replayed after creating
	// it again when it is missing, since the deduplication may have dropped
	// the CREATE that preceded it on 18.16.
	created := map[string]string{}
	for _, c := range stmts {
		q := c.SQL
		switch {
		case databaseDDL.MatchString(q):
			st.skipped++
			continue
		case localTable.MatchString(q):
			st.skipped++
			continue
		case isBatchInsert(q):
			st.batches++
			x, err := s.PrepareBatch(ctx, q)
			if err == nil {
				err = x.Abort()
			}
			if err != nil {
				st.failures = append(st.failures, fmt.Sprintf("batch insert from %s fails on ClickHouse %s: %v", c.Source, eng.Version(), err))
			}
			continue
		}
		if m := createPlain.FindStringSubmatch(q); m != nil && !strings.Contains(strings.ToUpper(q[:min(len(q), 40)]), "IF NOT EXISTS") {
			if err := s.Exec(ctx, "DROP TABLE IF EXISTS "+m[1]); err != nil {
				st.failures = append(st.failures, fmt.Sprintf("drop %s before replaying its CREATE: %v", m[1], err))
			}
			created[m[1]] = q
		}
		st.ran++
		err := run(ctx, s, c)
		if err != nil && strings.Contains(err.Error(), "UNKNOWN_TABLE") {
			for name, create := range created {
				if strings.Contains(q, name) {
					if s.Exec(ctx, create) == nil {
						err = run(ctx, s, c)
					}
					break
				}
			}
		}
		if err != nil && addColumn.MatchString(q) && strings.Contains(err.Error(), "DUPLICATE_COLUMN") {
			err = nil
		}
		if err != nil {
			st.failures = append(st.failures, fmt.Sprintf("statement from %s fails on ClickHouse %s: %v", c.Source, eng.Version(), err))
		}
	}
	return st
}

// run runs one captured statement; one sent with tables (the lists of
// chstore's reads) is sent with the same tables, empty, through the
// embedded engine's external tables.
func run(ctx context.Context, s *chdbstore.Store, c sqlcapture.Captured) error {
	if len(c.Tables) == 0 {
		return s.Exec(ctx, c.SQL)
	}
	tables, err := emptyTables(c.Tables)
	if err != nil {
		return err
	}
	rows, err := s.QueryExternal(ctx, tables, c.SQL)
	if err != nil {
		return err
	}
	return rows.Close()
}

// emptyTables makes tables of the captured names and columns.
func emptyTables(captured []sqlcapture.Table) ([]*ext.Table, error) {
	var out []*ext.Table
	for _, c := range captured {
		var cols []func(*ext.Table) error
		for _, col := range strings.Split(c.Structure, ",") {
			name, typ, ok := strings.Cut(strings.TrimSpace(col), " ")
			if !ok {
				return nil, fmt.Errorf("table %s: column %q has no type", c.Name, col)
			}
			cols = append(cols, ext.Column(name, column.Type(strings.TrimSpace(typ))))
		}
		t, err := ext.NewTable(c.Name, cols...)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", c.Name, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// The replay catches what 18.16 accepts and 26.7 rejects: the legacy
// MergeTree syntax, and a column the
// modern schema lacks in a batch insert.
func TestReplayFailsOnLegacyOnlySQL(t *testing.T) {
	s, err := eng.Open("kvt_replay_neg")
	if err != nil {
		t.Fatal(err)
	}
	migrate(t, s, s.Layout())
	st := replay(context.Background(), s, []sqlcapture.Captured{
		{SQL: "CREATE DATABASE IF NOT EXISTS kvt_replay_neg", Source: "skipped"},
		{SQL: "CREATE TABLE IF NOT EXISTS legacy_t (d Date, x UInt8) ENGINE = MergeTree(d, (x), 8192)", Source: "legacy"},
		{SQL: "SELECT count() FROM raw_lines WHERE node = 'n0'", Source: "fine"},
		{SQL: "INSERT INTO raw_lines (ts, no_such_column)", Source: "batch"},
		{SQL: "CREATE TABLE lock_t (owner String) ENGINE = TinyLog", Source: "fine"},
		{SQL: "CREATE TABLE lock_t (owner String) ENGINE = TinyLog", Source: "fine"},
		{SQL: "DROP TABLE IF EXISTS lock_t", Source: "fine"},
		{SQL: "SELECT any(owner) FROM lock_t", Source: "fine, recreated"},
		{SQL: "SELECT count() FROM no_such_table", Source: "unknown"},
		{SQL: "SELECT count() FROM raw_lines WHERE line_id GLOBAL IN kvt_lines", Source: "fine, with its table",
			Tables: []sqlcapture.Table{{Name: "kvt_lines", Structure: "id UInt64"}}},
		{SQL: "SELECT count() FROM raw_lines WHERE line_id GLOBAL IN kvt_lines2", Source: "list without its table"},
	})
	if st.skipped != 1 || st.batches != 1 || st.ran != 9 || len(st.failures) != 4 ||
		!strings.Contains(st.failures[0], "legacy") || !strings.Contains(st.failures[1], "batch") || !strings.Contains(st.failures[2], "unknown") ||
		!strings.Contains(st.failures[3], "without its table") {
		t.Fatalf("replay stats %+v", st)
	}
}

var batchInsert = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+[A-Za-z0-9_.]+\s*\([^)]*\)\s*$`)

func isBatchInsert(q string) bool { return batchInsert.MatchString(q) }

// readCapture reads the capture file, keeping the first of equal
// statements and at most three of one shape across all test processes.
func readCapture(t *testing.T, path string) []sqlcapture.Captured {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sqlcapture.Captured
	seen := map[string]bool{}
	shapes := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var c sqlcapture.Captured
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if seen[c.SQL] {
			continue
		}
		seen[c.SQL] = true
		sh := sqlcapture.Shape(c.SQL)
		if shapes[sh] >= 3 {
			continue
		}
		shapes[sh]++
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
