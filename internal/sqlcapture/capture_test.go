package sqlcapture

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "statements.jsonl")
	t.Setenv(Env, path)
	for _, s := range []struct {
		db, sql string
		args    []any
	}{
		{"kvt_test_1_2", "SELECT count() FROM kvt_test_1_2.raw_lines WHERE node = ?", []any{"p0"}},
		{"kvt_test_1_2", "SELECT count() FROM kvt_test_1_2.raw_lines WHERE node = ?", []any{"p0"}}, // duplicate
		{"kvt_test_1_2", "SELECT count() FROM kvt_test_1_2.raw_lines WHERE node = ?", []any{"p1"}},
		{"kvt_test_1_2", "SELECT count() FROM kvt_test_1_2.raw_lines WHERE node = ?", []any{"p2"}},
		{"kvt_test_1_2", "SELECT count() FROM kvt_test_1_2.raw_lines WHERE node = ?", []any{"p3"}}, // over PerShape
		{"kvtrail", "SELECT 1 FROM kvtrail.nodes, kvtrail_cluster.x WHERE line_id = ?", []any{uint64(7)}},
	} {
		if err := Record("TestRecord", s.db, s.sql, s.args); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c Captured
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		got = append(got, c.SQL)
	}
	want := []string{
		"SELECT count() FROM kvt_replay.raw_lines WHERE node = 'p0'",
		"SELECT count() FROM kvt_replay.raw_lines WHERE node = 'p1'",
		"SELECT count() FROM kvt_replay.raw_lines WHERE node = 'p2'",
		"SELECT 1 FROM kvt_replay.nodes, kvtrail_cluster.x WHERE line_id = 7",
	}
	if len(got) != len(want) {
		t.Fatalf("recorded %d statements, want %d:\n%q", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d = %q, want %q", i, got[i], want[i])
		}
	}
}
