// Package sqlcheck parses SQL with a modern-grammar ClickHouse parser
// (AfterShip/clickhouse-sql-parser). Tests run every statement kvtrail sends
// through it: the local server is 18.16, users run 24.x+, and this is how a
// statement that only the old server accepts is caught here.
package sqlcheck

import (
	"fmt"
	"strings"

	chparser "github.com/AfterShip/clickhouse-sql-parser/parser"
)

// Check returns an error if sql does not parse under the modern grammar.
func Check(sql string) error {
	stmts, err := chparser.NewParser(sql).ParseStmts()
	if err != nil {
		return fmt.Errorf("modern ClickHouse grammar rejects statement: %w\n%s", err, clip(sql))
	}
	if len(stmts) == 0 && strings.TrimSpace(sql) != "" {
		return fmt.Errorf("modern ClickHouse grammar found no statement in:\n%s", clip(sql))
	}
	return nil
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}
