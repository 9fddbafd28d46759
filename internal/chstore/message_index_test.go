package chstore_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kvtrail/kvtrail/migrations"
)

// Migration 0017 puts msg_index at the end of the event tables' sorting
// keys on a database that already holds rows: they keep folding as before
// (msg_index 0), two messages of one line no longer fold into one, and a
// rerun of the migration after a crash (its ALTERs done, its record not
// written) goes through.
func TestMessageIndexJoinsTheKeys(t *testing.T) {
	ctx := context.Background()
	s := migratedBefore(t, "0017")
	t0 := time.Date(2026, 7, 4, 0, 0, 5, 0, time.UTC)
	write := func(cols string, vals ...any) {
		t.Helper()
		x, err := s.OpenInsert(ctx, "batch_stats", strings.Fields(cols))
		if err != nil {
			t.Fatal(err)
		}
		if err := x.AppendRow(vals...); err != nil {
			t.Fatal(err)
		}
		if err := x.Send(); err != nil {
			t.Fatal(err)
		}
	}
	count := func(q string) uint64 {
		t.Helper()
		var n uint64
		if err := s.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	// One line stored twice before the migration: a re-ingest's copy.
	for range 2 {
		write("ts ts_ns node dp_rank running_req line_id ingested_at", t0, uint64(t0.UnixNano()), "d0", int16(0), int32(3), uint64(42), t0)
	}

	if _, err := newMigrator(t, s, nil).Up(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tb := range []string{"engine_events", "batch_stats", "transfer_events", "page_events"} {
		q := "SELECT toUInt64(is_in_sorting_key) FROM system.columns WHERE database = currentDatabase() AND table = '" + tb + "' AND name = 'msg_index'"
		if count(q) != 1 {
			t.Errorf("%s: msg_index is not in the sorting key", tb)
		}
	}
	if got := count("SELECT count() FROM batch_stats FINAL"); got != 1 {
		t.Errorf("the line stored twice before the migration: %d rows FINAL, want 1", got)
	}
	// A second message of the same line, in the same second.
	write("ts ts_ns node dp_rank running_req line_id msg_index ingested_at", t0, uint64(t0.UnixNano()), "d0", int16(1), int32(5), uint64(42), uint8(1), t0)
	if err := s.Exec(ctx, "OPTIMIZE TABLE batch_stats FINAL"); err != nil {
		t.Fatal(err)
	}
	if got := count("SELECT count() FROM batch_stats"); got != 2 {
		t.Errorf("two messages of one line: %d rows after the merge, want 2", got)
	}
	if got := count("SELECT count() FROM batch_stats WHERE msg_index = 1 AND dp_rank = 1 AND running_req = 5"); got != 1 {
		t.Errorf("the second message's row: %d, want 1", got)
	}

	// The same statements again, as the migrator runs an interrupted
	// migration: a later version holding 0017's text.
	again := migrationsBefore(t, "9999")
	body, err := fs.ReadFile(migrations.FS, "0017_message_index.sql")
	if err != nil {
		t.Fatal(err)
	}
	again["9000_message_index_again.sql"] = &fstest.MapFile{Data: body}
	if _, err := newMigrator(t, s, again).Up(ctx); err != nil {
		t.Fatalf("0017 run a second time: %v", err)
	}
	if got := count("SELECT count() FROM batch_stats"); got != 2 {
		t.Errorf("after the rerun: %d rows, want 2", got)
	}
}
