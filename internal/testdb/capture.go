package testdb

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/kvtrail/kvtrail/internal/chbind"
)

// EnvCapture names a file that every statement the test server accepted
// is appended to, bound as the server received it, one JSON object per
// line. scripts/test.sh sets it, and after the suite the modern-engine
// tier (internal/chdbtier) replays the file on ClickHouse 26.7.
const EnvCapture = "KVTRAIL_SQL_CAPTURE"

// Captured is one line of the capture file.
type Captured struct {
	// SQL is the statement with its arguments bound by the driver's binder
	// and the test's database renamed to ReplayDatabase.
	SQL string `json:"sql"`
	// Test is the test that sent it, for failure messages.
	Test string `json:"test"`
}

// ReplayDatabase replaces each test's own database name in captured
// statements: the replay runs them all against one migrated database.
const ReplayDatabase = "kvt_replay"

// perShape caps how many statements of one shape (the text with its
// literals blanked) a test process records: a query run with a thousand
// different ids is one statement to the parser and the planner, and the
// replay must stay within minutes.
const perShape = 3

var (
	testDBName = regexp.MustCompile(`kvt_test_\d+_\d+`)
	strLit     = regexp.MustCompile(`'(?:[^'\\]|\\.)*'`)
	numLit     = regexp.MustCompile(`\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b`)

	capMu    sync.Mutex
	capFile  *os.File
	capErr   error
	capOnce  sync.Once
	capSeen  = map[string]bool{}
	capShape = map[string]int{}
)

// Shape is sql with its string and number literals blanked.
func Shape(sql string) string {
	return numLit.ReplaceAllString(strLit.ReplaceAllString(sql, "'?'"), "N")
}

// capture records an accepted statement when EnvCapture is set. It returns
// an error only when the file cannot be written (the test then fails: a
// missing capture would let the tier pass without checking anything).
func capture(test, sql string, args []any) error {
	path := os.Getenv(EnvCapture)
	if path == "" {
		return nil
	}
	capOnce.Do(func() {
		capFile, capErr = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	})
	if capErr != nil {
		return fmt.Errorf("open %s: %w", EnvCapture, capErr)
	}
	bound, err := chbind.Bind(time.UTC, sql, args...)
	if err != nil {
		return fmt.Errorf("bind captured statement: %w", err)
	}
	bound = testDBName.ReplaceAllString(bound, ReplayDatabase)
	capMu.Lock()
	defer capMu.Unlock()
	if capSeen[bound] {
		return nil
	}
	capSeen[bound] = true
	shape := Shape(bound)
	if capShape[shape] >= perShape {
		return nil
	}
	capShape[shape]++
	line, err := json.Marshal(Captured{SQL: bound, Test: test})
	if err != nil {
		return err
	}
	// One write per line: O_APPEND keeps lines from concurrent test
	// processes whole.
	if _, err := capFile.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
