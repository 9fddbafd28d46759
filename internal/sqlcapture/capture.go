// Package sqlcapture records the statements a ClickHouse server accepted,
// bound as the server received them, so that the modern-engine tier
// (internal/chdbtier) can replay them on ClickHouse 26.7 after the test
// suite. Recording is on only when KVT_SQL_CAPTURE names a file
// (scripts/test.sh sets it for the test run); internal/testdb records each
// test's statements, and internal/chstore those of stores opened without a
// hook (the kvtrail processes that CLI tests start).
package sqlcapture

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/kvtrail/kvtrail/internal/chbind"
)

// Env names the file statements are appended to, one JSON object per line.
// It is not a KVTRAIL_ variable: those are configuration, and the CLI tests
// strip them from the kvtrail processes they start, which must record too.
const Env = "KVT_SQL_CAPTURE"

// ReplayDatabase replaces the recording store's database name in captured
// statements: the replay runs them all against one migrated database.
const ReplayDatabase = "kvt_replay"

// Captured is one line of the capture file.
type Captured struct {
	// SQL is the statement with its arguments bound by the driver's binder
	// and the store's database renamed to ReplayDatabase.
	SQL string `json:"sql"`
	// Source is the test or process that sent it, for failure messages.
	Source string `json:"test"`
	// Tables are the tables sent with it as external data (the name the
	// statement reads and the columns): the replay sends them, empty.
	Tables []Table `json:"tables,omitempty"`
}

// Table is a table sent with a statement as external data.
type Table struct {
	Name string `json:"name"`
	// Structure is its columns as "name Type, ...".
	Structure string `json:"structure"`
}

// PerShape caps how many statements of one shape (the text with its
// literals blanked) a process records: a query run with a thousand
// different ids is one statement to the parser and the planner, and the
// replay must stay within minutes.
const PerShape = 3

var (
	strLit = regexp.MustCompile(`'(?:[^'\\]|\\.)*'`)
	numLit = regexp.MustCompile(`\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b`)

	mu      sync.Mutex
	file    *os.File
	openErr error
	opened  sync.Once
	seen    = map[string]bool{}
	shapes  = map[string]int{}
	dbNames = map[string]*regexp.Regexp{}
)

// Enabled reports whether recording is on.
func Enabled() bool { return os.Getenv(Env) != "" }

// Shape is sql with its string and number literals blanked.
func Shape(sql string) string {
	return numLit.ReplaceAllString(strLit.ReplaceAllString(sql, "'?'"), "N")
}

// Record appends an accepted statement of a store bound to database db,
// sent with tables. It returns an error only when the file cannot be
// written: a missing capture would let the tier pass without checking
// anything.
func Record(source, db, sql string, args []any, tables ...Table) error {
	path := os.Getenv(Env)
	if path == "" {
		return nil
	}
	opened.Do(func() {
		file, openErr = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	})
	if openErr != nil {
		return fmt.Errorf("open %s: %w", Env, openErr)
	}
	bound, err := chbind.Bind(time.UTC, sql, args...)
	if err != nil {
		return fmt.Errorf("bind captured statement: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if db != "" && db != "default" && db != "system" {
		re := dbNames[db]
		if re == nil {
			re = regexp.MustCompile(`\b` + regexp.QuoteMeta(db) + `\b`)
			dbNames[db] = re
		}
		bound = re.ReplaceAllString(bound, ReplayDatabase)
	}
	if seen[bound] {
		return nil
	}
	seen[bound] = true
	shape := Shape(bound)
	if shapes[shape] >= PerShape {
		return nil
	}
	shapes[shape]++
	line, err := json.Marshal(Captured{SQL: bound, Source: source, Tables: tables})
	if err != nil {
		return err
	}
	// One write per line: O_APPEND keeps lines from concurrent test
	// processes whole.
	if _, err := file.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
