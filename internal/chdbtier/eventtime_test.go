//go:build chdb

package chdbtier

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/chdbstore"
	"github.com/kvtrail/kvtrail/internal/chstore"
)

// The modern rendering's event_time holds the exact time the writer gave,
// and the statements kvtrail sends answer the same on the modern schema as
// on the portable one, including at the second boundaries where a
// nanosecond ts would not (which is why ts stays DateTime: migration 0007).
func TestEventTimeKeepsResults(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	// Three responses inside one second and one in the next: the second
	// boundary is where DateTime and DateTime64 comparisons part.
	times := []time.Time{base.Add(300 * time.Millisecond), base.Add(700*time.Millisecond + 42), base.Add(999_999_999), base.Add(time.Second + 5)}
	load := func(s *chdbstore.Store) {
		t.Helper()
		// The column list ingest uses for gateway_responses names ts and
		// ts_ns, never event_time.
		x, err := s.PrepareBatch(ctx, "INSERT INTO gateway_responses (ts, ts_ns, request_id, tenant, line_id, ingested_at)")
		if err != nil {
			t.Fatal(err)
		}
		for i, ts := range times {
			if err := x.Append(ts, uint64(ts.UnixNano()), fmt.Sprintf("req-%d", i), "acme", uint64(i+1), base); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.Send(); err != nil {
			t.Fatal(err)
		}
	}
	open := func(db string, v chstore.Version) *chdbstore.Store {
		t.Helper()
		s, err := eng.Open(db)
		if err != nil {
			t.Fatal(err)
		}
		migrate(t, s, chstore.Layout{Database: db, Version: v})
		load(s)
		return s
	}
	portable := open("kvt_et_portable", chstore.Version{Major: 18, Minor: 16, Patch: 1})
	modern := open("kvt_et_modern", eng.Version())

	// event_time is the writer's time to the nanosecond.
	rows, err := modern.Query(ctx, "SELECT request_id, event_time FROM gateway_responses ORDER BY request_id")
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for ; rows.Next(); i++ {
		var id string
		var et time.Time
		if err := rows.Scan(&id, &et); err != nil {
			t.Fatal(err)
		}
		if !et.Equal(times[i]) {
			t.Errorf("%s: event_time %s, written %s", id, et.Format(time.RFC3339Nano), times[i].Format(time.RFC3339Nano))
		}
	}
	rows.Close()
	if i != len(times) {
		t.Fatalf("read %d rows of %d", i, len(times))
	}

	// The shapes kvtrail sends on event-time columns: closed windows with
	// whole-second bounds (analyze's loads, the UI's spans), the request
	// search's keyset (ts_ns cursor plus a ts bound truncated to the
	// second), per-minute buckets (completeness), ts read back.
	cursor := uint64(times[2].UnixNano())
	shapes := []struct {
		name string
		sql  string
		args []any
	}{
		{"closed window", "SELECT request_id FROM gateway_responses WHERE ts >= toDateTime(?) AND ts <= toDateTime(?) ORDER BY ts_ns",
			[]any{uint32(base.Unix()), uint32(base.Unix())}},
		{"keyset, newest first", "SELECT request_id FROM gateway_responses WHERE (ts_ns < ? OR (ts_ns = ? AND request_id < ?)) AND ts <= ? ORDER BY ts_ns DESC, request_id DESC",
			[]any{cursor, cursor, "req-2", time.Unix(0, int64(cursor)).UTC().Truncate(time.Second)}},
		{"after a second", "SELECT request_id FROM gateway_responses WHERE ts > toDateTime(?) ORDER BY ts_ns",
			[]any{uint32(base.Unix())}},
		{"minute buckets", "SELECT toString(toStartOfMinute(ts)) AS bucket, toString(count()) FROM gateway_responses GROUP BY bucket ORDER BY bucket", nil},
		{"ts read back", "SELECT toString(ts), toString(ts_ns) FROM gateway_responses ORDER BY ts_ns", nil},
	}
	for _, sh := range shapes {
		got := map[string][]string{}
		for name, s := range map[string]*chdbstore.Store{"portable": portable, "modern": modern} {
			got[name] = rowsOf(t, s, sh.sql, sh.args...)
		}
		if len(got["portable"]) == 0 {
			t.Errorf("%s: no rows: the shape tests nothing", sh.name)
		}
		if !reflect.DeepEqual(got["portable"], got["modern"]) {
			t.Errorf("%s: portable schema %q, modern schema %q", sh.name, got["portable"], got["modern"])
		}
	}

	// The rejected alternative: ts itself DateTime64(9). The same closed
	// window and keyset lose the rows inside the bound second.
	if err := modern.Exec(ctx, "CREATE TABLE IF NOT EXISTS ts64 (ts DateTime64(9, 'UTC'), ts_ns UInt64, request_id String) ENGINE = MergeTree ORDER BY ts_ns"); err != nil {
		t.Fatal(err)
	}
	if err := modern.Exec(ctx, "INSERT INTO ts64 (ts, ts_ns, request_id) SELECT fromUnixTimestamp64Nano(toInt64(ts_ns)), ts_ns, request_id FROM gateway_responses"); err != nil {
		t.Fatal(err)
	}
	for _, sh := range shapes[:2] {
		want := rowsOf(t, portable, sh.sql, sh.args...)
		got := rowsOf(t, modern, strings.Replace(sh.sql, "FROM gateway_responses", "FROM ts64", 1), sh.args...)
		if reflect.DeepEqual(want, got) {
			t.Errorf("%s: a DateTime64 ts answers like DateTime (%q); migration 0007's reason no longer holds", sh.name, got)
		} else {
			t.Logf("%s: DateTime ts %q, DateTime64 ts %q", sh.name, want, got)
		}
	}
}
