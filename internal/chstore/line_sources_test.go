package chstore_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// A database holding a raw line with its own source and file_digest
// (before migration 0013) is migrated, then a file is ingested as ingest
// now writes it: its lines carry a source_ref and empty strings, and its
// source is one line_sources row. Every read of a line's file and digest
// (the evidence lines of the UI and the request/finding pages, the copy
// into case_evidence, posture's boot and version lines, the push path's
// stored-line lookup) gives both kinds of rows their names, and forced
// re-ingests leave one source row.
func TestLineSourcesOldAndNewRowsReadAlike(t *testing.T) {
	ctx := context.Background()
	s := testdb.Empty(t)
	if _, err := newMigrator(t, s, migrationsBefore(t, "0013")).Up(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	const node, oldSource, oldDigest, oldID = "prefill-0", "/logs/old/prefill-0.log", "old-stream-digest", uint64(11)
	x, err := s.OpenInsert(ctx, "raw_lines", strings.Fields(`ts ts_ns node role log_format source file_digest byte_offset
		line_no line_id kind parse_status parse_error rid bootstrap_room line ingested_at`))
	if err != nil {
		t.Fatal(err)
	}
	oldTS := t0.Add(5 * time.Second)
	if err := x.AppendRow(oldTS, uint64(oldTS.UnixNano()), node, "prefill", "sglang", oldSource, oldDigest, uint64(40), uint64(2),
		oldID, "", "unknown", "", "", uint64(0), "[2026-07-01 00:00:05] sglang==0.4.9 (old row)", t0); err != nil {
		t.Fatal(err)
	}
	if err := x.Send(); err != nil {
		t.Fatal(err)
	}
	if _, err := newMigrator(t, s, nil).Up(ctx); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "prefill-0.log")
	content := "[2026-07-01 00:00:01] sglang==0.5.2 (new row)\n[2026-07-01 00:00:02] some other line\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	src := []ingest.Source{{Path: path, Format: "sglang", Node: node, Role: "prefill"}}
	if _, err := ingest.New(s, ingest.Options{}).Ingest(ctx, src); err != nil {
		t.Fatal(err)
	}

	// The new rows as stored: a ref, no strings.
	var newIDs []uint64
	var ref uint64
	rows, err := s.Query(ctx, "SELECT line_id, source, file_digest, source_ref FROM raw_lines WHERE source_ref != 0 ORDER BY line_id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, r uint64
		var so, fd string
		if err := rows.Scan(&id, &so, &fd, &r); err != nil {
			t.Fatal(err)
		}
		if so != "" || fd != "" {
			t.Errorf("new line %d stores source %q, digest %q; want both empty", id, so, fd)
		}
		newIDs, ref = append(newIDs, id), r
	}
	rows.Close()
	if len(newIDs) != 2 {
		t.Fatalf("%d new lines with a source_ref, want 2", len(newIDs))
	}
	var stream string
	if err := s.QueryRow(ctx, "SELECT any(stream_id) FROM file_checkpoints").Scan(&stream); err != nil {
		t.Fatal(err)
	}
	if want := ingest.SourceRef(node, path, stream); ref != want {
		t.Fatalf("source_ref %d, want SourceRef(node, path, stream) = %d", ref, want)
	}
	want := map[uint64]string{oldID: oldSource + " " + oldDigest}
	for _, id := range newIDs {
		want[id] = path + " " + stream
	}
	check := func(what string, got map[uint64]string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %d lines %v, want %d", what, len(got), got, len(want))
		}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("%s: line %d named %q, want %q", what, id, got[id], w)
			}
		}
	}

	// Evidence lines (request, finding and evidence pages).
	ui := chstore.UIStore{Store: s}
	ids := append([]uint64{oldID}, newIDs...)
	for _, near := range [][]domain.LineSpan{{{From: t0, To: t0.Add(time.Minute)}}, nil} {
		lines, err := ui.Lines(ctx, ids, near...)
		if err != nil {
			t.Fatal(err)
		}
		got := map[uint64]string{}
		for _, l := range lines {
			got[l.LineID] = l.Source + " " + l.FileDigest
		}
		check("Lines", got)
	}

	// The legal hold's copy.
	c := domain.Case{ID: "case-1", From: t0, To: t0.Add(time.Minute)}
	if n, err := ui.HoldEvidence(ctx, c, "tester", t0.Add(time.Hour)); err != nil || n != 3 {
		t.Fatalf("hold: %d lines, err %v; want 3", n, err)
	}
	got := heldSources(t, s, "case-1")
	check("case_evidence", got)

	// Posture: where boot lines are, and version lines in file order.
	places, err := s.LinePlaces(ctx, node, ids)
	if err != nil {
		t.Fatal(err)
	}
	digests := map[uint64]string{}
	for _, p := range places {
		digests[p.LineID] = p.File
	}
	for id, w := range want {
		if _, d, _ := strings.Cut(w, " "); digests[id] != d {
			t.Errorf("LinePlaces: line %d in file %q, want %q", id, digests[id], d)
		}
	}
	vl, err := s.VersionLines(ctx, node, t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, l := range vl {
		order = append(order, l.File)
	}
	wantOrder := []string{oldDigest, stream}
	sort.Strings(wantOrder)
	if strings.Join(order, " ") != strings.Join(wantOrder, " ") {
		t.Errorf("VersionLines files %q, want %q (ordered by file)", order, wantOrder)
	}

	// The push path's lookup of lines already stored.
	for _, sp := range []ingest.LineSpan{
		{Node: node, FileDigest: oldDigest, From: t0, To: t0.Add(time.Minute)},
		{Node: node, FileDigest: stream, SourceRef: ref, From: t0, To: t0.Add(time.Minute)},
	} {
		stored, err := s.StoredLineIDs(ctx, []ingest.LineSpan{sp})
		if err != nil {
			t.Fatal(err)
		}
		if wantN := map[bool]int{true: 1, false: 2}[sp.SourceRef == 0]; len(stored) != wantN {
			t.Errorf("StoredLineIDs(%s): %v, want %d lines", sp.FileDigest, stored, wantN)
		}
	}

	// With more sources than one statement names (here: one per
	// statement), the hold copies in parts and the version lines read the
	// sources of their own lines; the names are the same.
	undo := chstore.SetSourceChunkBytes(1)
	path2 := filepath.Join(dir, "prefill-0.second.log")
	if err := os.WriteFile(path2, []byte("[2026-07-01 00:00:03] SGLANG_ENABLE_X=1 (second file)\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.New(s, ingest.Options{}).Ingest(ctx, []ingest.Source{{Path: path2, Format: "sglang", Node: node, Role: "prefill"}}); err != nil {
		t.Fatal(err)
	}
	var id2 uint64
	var stream2 string
	if err := s.QueryRow(ctx, "SELECT any(stream_id) FROM file_checkpoints WHERE path = ?", path2).Scan(&stream2); err != nil {
		t.Fatal(err)
	}
	if err := s.QueryRow(ctx, "SELECT any(line_id) FROM raw_lines WHERE source_ref = ?", ingest.SourceRef(node, path2, stream2)).Scan(&id2); err != nil || id2 == 0 {
		t.Fatalf("the second file's line: %d, %v", id2, err)
	}
	want[id2] = path2 + " " + stream2
	c2 := domain.Case{ID: "case-2", From: t0, To: t0.Add(time.Minute)}
	if n, err := ui.HoldEvidence(ctx, c2, "tester", t0.Add(time.Hour)); err != nil || n != 4 {
		t.Fatalf("hold in parts: %d lines, err %v; want 4", n, err)
	}
	got = heldSources(t, s, "case-2")
	check("case_evidence in parts", got)
	if vl, err = s.VersionLines(ctx, node, t0, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	order = order[:0]
	for _, l := range vl {
		order = append(order, l.File)
	}
	wantOrder = []string{oldDigest, stream, stream2}
	sort.Strings(wantOrder)
	if strings.Join(order, " ") != strings.Join(wantOrder, " ") {
		t.Errorf("VersionLines with many sources: files %q, want %q", order, wantOrder)
	}
	undo()

	// Forced re-ingests write the source again; it folds into one row.
	for i := 0; i < 2; i++ {
		if _, err := ingest.New(s, ingest.Options{Force: true}).Ingest(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	var n, lines uint64
	if err := s.QueryRow(ctx, "SELECT count() FROM line_sources FINAL").Scan(&n); err != nil || n != 2 {
		t.Errorf("line_sources after re-ingest: %d rows, err %v; want 2 (one per file)", n, err)
	}
	if err := s.QueryRow(ctx, "SELECT count() FROM raw_lines FINAL").Scan(&lines); err != nil || lines != 4 {
		t.Errorf("raw_lines after re-ingest: %d rows, err %v; want 4", lines, err)
	}
}

// heldSources reads a case's held lines back: line id → "source digest".
func heldSources(t *testing.T, s *chstore.Store, caseID string) map[uint64]string {
	t.Helper()
	rows, err := s.Query(context.Background(), "SELECT line_id, source, file_digest FROM case_evidence FINAL WHERE case_id = ?", caseID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[uint64]string{}
	for rows.Next() {
		var id uint64
		var so, fd string
		if err := rows.Scan(&id, &so, &fd); err != nil {
			t.Fatal(err)
		}
		got[id] = so + " " + fd
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
