package ingest

import (
	"hash/fnv"
	"time"
)

// Line sources by reference (migration 0013): raw_lines rows used to carry
// their source (file path or push stream labels) and file_digest (stream
// id) as strings, 29% of the table's uncompressed bytes. Each source is now
// a row of line_sources, written once per source per run, and a line
// carries its source_ref; its source and file_digest columns are left at
// their empty default. Rows stored before keep their strings (source_ref
// 0), and readers take theirs (internal/chstore/line_sources.go).
//
// A source's row goes into the same commit window as its lines, and the
// window's checkpoints (the acknowledgement of its lines) are saved only
// once every INSERT of the window, that row's included, is stored: a line
// is never acknowledged without its source row. sourcesSeen is what a run
// has written, so that a source costs one row per run, not one per window.

// SourceRef is the line_sources key of the lines node read from source
// (file path or push stream labels) with stream id digest: FNV-64a of the
// three, so every process (re-ingest, a rerun after a crash, ingest
// workers on other machines writing the same cluster) computes the same
// key for the same source, and the Replacing engine folds their rows. It
// is never 0: 0 in raw_lines.source_ref means a row stored before
// migration 0013 that holds its own strings.
func SourceRef(node, source, digest string) uint64 {
	h := fnv.New64a()
	for _, s := range [...]string{node, source, digest} {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1
}

// sourceRow is one line_sources row.
type sourceRow struct {
	ref                  uint64
	node, source, digest string
}

var sourceCols = []string{"source_ref", "node", "source", "file_digest", "first_seen", "version"}

// maxSeenSources bounds sourcesSeen: past it the set is forgotten and
// sources are written again as they recur, which the Replacing engine
// folds (rows cost, not correctness).
const maxSeenSources = 1 << 16

// sourcesSeen is what a run has written to line_sources. stored holds the
// sources of committed windows, pending those sent in the open window: a
// failed window drops pending, so its sources are written again with the
// retry's lines.
type sourcesSeen struct {
	stored  map[uint64]bool
	pending map[uint64]bool
}

func (s *sourcesSeen) covers(ref uint64) bool {
	return s != nil && (s.pending[ref] || s.stored[ref])
}

func (s *sourcesSeen) sent(rows []sourceRow) {
	if s == nil || len(rows) == 0 {
		return
	}
	if s.pending == nil {
		s.pending = map[uint64]bool{}
	}
	for _, r := range rows {
		s.pending[r.ref] = true
	}
}

// committed moves the open window's sources to stored.
func (s *sourcesSeen) committed() {
	if s == nil || len(s.pending) == 0 {
		return
	}
	if s.stored == nil || len(s.stored)+len(s.pending) > maxSeenSources {
		s.stored = make(map[uint64]bool, len(s.pending))
	}
	for ref := range s.pending {
		s.stored[ref] = true
	}
	clear(s.pending)
}

// dropped forgets the open window's sources: its INSERTs were not stored.
func (s *sourcesSeen) dropped() {
	if s != nil {
		clear(s.pending)
	}
}

// newSources returns a row for each source of raw that seen does not
// hold, in the order of their first lines.
func newSources(raw []rawRow, seen *sourcesSeen) []sourceRow {
	var rows []sourceRow
	var last uint64
	for i := range raw {
		r := &raw[i]
		if r.ref == last || seen.covers(r.ref) {
			continue
		}
		last = r.ref
		dup := false
		for _, x := range rows {
			if x.ref == r.ref {
				dup = true
				break
			}
		}
		if !dup {
			rows = append(rows, sourceRow{ref: r.ref, node: r.node, source: r.source, digest: r.digest})
		}
	}
	return rows
}

// sourcesWrite is the line_sources share of a batch. first_seen is when
// the row was written and version makes the Replacing engine keep the
// earliest (the other columns are the same in every row of a ref). Its
// rows are marked in seen once appended to the window's INSERT.
func sourcesWrite(raw []rawRow, now time.Time, seen *sourcesSeen) tableWrite {
	rows := newSources(raw, seen)
	at := chTime(now)
	version := ^uint32(0) - uint32(at.Unix())
	fill := columns(rows,
		col(func(r *sourceRow) uint64 { return r.ref }),
		col(func(r *sourceRow) string { return r.node }),
		col(func(r *sourceRow) string { return r.source }),
		col(func(r *sourceRow) string { return r.digest }),
		col(func(*sourceRow) time.Time { return at }),
		col(func(*sourceRow) uint32 { return version }),
	)
	return tableWrite{"line_sources", len(rows), sourceCols, func(x TableWriter, lo, hi int) error {
		if err := fill(x, lo, hi); err != nil {
			return err
		}
		if hi == len(rows) {
			seen.sent(rows)
		}
		return nil
	}}
}
