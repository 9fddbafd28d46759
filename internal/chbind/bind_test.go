package chbind

import (
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

func TestBind(t *testing.T) {
	ts := time.Date(2026, 7, 1, 12, 30, 0, 0, time.UTC)
	tests := []struct {
		sql  string
		args []any
		want string
	}{
		{"SELECT 1", nil, "SELECT 1"},
		{"SELECT count() FROM t WHERE a = ? AND b = ?", []any{"x'y", uint64(7)}, `SELECT count() FROM t WHERE a = 'x\'y' AND b = 7`},
		{"SELECT '?' , ?", []any{int16(-3)}, "SELECT '?' , -3"},
		{"SELECT ? ", []any{ts}, "SELECT toDateTime('2026-07-01 12:30:00') "},
		{"SELECT has(?, x)", []any{[]string{"a", "b"}}, "SELECT has(['a', 'b'], x)"},
		{"SELECT x IN ?", []any{clickhouse.GroupSet{Value: []any{"a", uint8(1)}}}, "SELECT x IN ('a', 1)"},
	}
	for _, tt := range tests {
		got, err := Bind(time.UTC, tt.sql, tt.args...)
		if err != nil {
			t.Errorf("Bind(%q): %v", tt.sql, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Bind(%q, %v)\n got %s\nwant %s", tt.sql, tt.args, got, tt.want)
		}
	}
	if _, err := Bind(time.UTC, "SELECT ?, ?", 1); err == nil {
		t.Error("Bind with too few arguments: no error")
	}
}
