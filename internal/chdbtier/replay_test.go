//go:build chdb

package chdbtier

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/kvtrail/kvtrail/internal/testdb"
)

// EnvReplay names the capture file the main suite wrote
// (testdb.EnvCapture); scripts/test.sh sets it for this tier.
const EnvReplay = "KVTRAIL_SQL_REPLAY"

var (
	databaseDDL = regexp.MustCompile(`(?i)^\s*(CREATE|DROP)\s+DATABASE\b`)
	createPlain = regexp.MustCompile(`(?i)^\s*CREATE\s+TABLE\s+([A-Za-z0-9_.]+)\s`)
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
//     process: they differ only in values.
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
	s, err := eng.Open(testdb.ReplayDatabase)
	if err != nil {
		t.Fatal(err)
	}
	migrate(t, s, s.Layout())
	ctx := context.Background()
	var failed, ran, skipped, batches int
	for _, c := range stmts {
		q := c.SQL
		switch {
		case databaseDDL.MatchString(q):
			skipped++
			continue
		case isBatchInsert(q):
			batches++
			x, err := s.PrepareBatch(ctx, q)
			if err == nil {
				err = x.Abort()
			}
			if err != nil {
				failed++
				t.Errorf("batch insert from %s fails on ClickHouse %s: %v", c.Test, eng.Version(), err)
			}
			continue
		}
		if m := createPlain.FindStringSubmatch(q); m != nil && !strings.Contains(strings.ToUpper(q[:40]), "IF NOT EXISTS") {
			if err := s.Exec(ctx, "DROP TABLE IF EXISTS "+m[1]); err != nil {
				t.Errorf("drop %s before replaying its CREATE: %v", m[1], err)
			}
		}
		ran++
		if err := s.Exec(ctx, q); err != nil {
			failed++
			t.Errorf("statement from %s fails on ClickHouse %s: %v", c.Test, eng.Version(), err)
		}
	}
	t.Logf("%d captured statements: %d executed, %d batch inserts prepared, %d database DDL skipped, %d failed",
		len(stmts), ran, batches, skipped, failed)
}

var batchInsert = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+[A-Za-z0-9_.]+\s*\([^)]*\)\s*$`)

func isBatchInsert(q string) bool { return batchInsert.MatchString(q) }

// readCapture reads the capture file, keeping the first of equal
// statements and at most three of one shape across all test processes.
func readCapture(t *testing.T, path string) []testdb.Captured {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []testdb.Captured
	seen := map[string]bool{}
	shapes := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var c testdb.Captured
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if seen[c.SQL] {
			continue
		}
		seen[c.SQL] = true
		sh := testdb.Shape(c.SQL)
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
