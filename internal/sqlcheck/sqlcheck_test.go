package sqlcheck

import "testing"

func TestCheck(t *testing.T) {
	tests := []struct {
		sql string
		ok  bool
	}{
		{"SELECT 1", true},
		{"SELECT a, b FROM t ALL LEFT JOIN (SELECT id, any(b) AS b FROM r GROUP BY id) USING id WHERE a = ?", true},
		{"CREATE TABLE IF NOT EXISTS db.t (ts DateTime, s LowCardinality(String)) ENGINE = ReplacingMergeTree PARTITION BY toYYYYMMDD(ts) ORDER BY (s, ts) SETTINGS index_granularity = 8192", true},
		{"SELEC 1", false},
		{"SELECT a, b FROM WHERE a = 1", false},
		{"CREATE TABLE t ENGINE = MergeTree ORDER BY", false},
	}
	for _, tt := range tests {
		err := Check(tt.sql)
		if (err == nil) != tt.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", tt.sql, err, tt.ok)
		}
	}
}
