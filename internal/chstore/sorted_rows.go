package chstore

import (
	"cmp"
	"slices"
)

// The engine and gateway reads of a slice are sorted here, not by the
// server. ClickHouse 18.16 sorts a whole result before it sends the first
// block: on one slice of incident-2026 at scale 2 (686,861 rows read) the
// read took 0.57 s with ORDER BY ts_ns, line_id and 0.20 s without, and
// the client sat idle while the server sorted. Unordered, the server
// streams blocks as it reads parts and the client decodes beside it; Go
// then sorts a 24-byte key per row. A slice's core lines are held by the
// caller anyway, so for them collecting first costs only the keys; a
// margin's lines (LinkMargin wide, filtered by the caller) are now held
// until the margin's read is sorted, where before the lines the filter
// dropped were garbage at once. The decode lines the replay streams node by node stay sorted by
// the server: those reads are bounded by streaming them, not by a slice.

// rowKey orders one collected row by its time and line id.
type rowKey[T any] struct {
	ns, line uint64
	row      *T
}

// sortedRows is an unordered read, collected, handed over in order. Each
// row is its own allocation, as when the server sorted: callers keep a
// few rows of a read for the rest of the run (the requests of victim
// findings, across slices), and rows sharing larger allocations kept
// those whole alive (at 2M requests, 1.8 GB RSS instead of 0.55).
type sortedRows[T any] struct {
	keys []rowKey[T]
	// tie orders two rows of the same nanosecond before their line ids
	// (the gateway orders by request id there); nil: by line id alone.
	tie func(a, b *T) int
	// msg is a row's place in its line (msg_index; nil: 0). Two rows of
	// one time and line are rare (a copy not merged yet, or two messages
	// of a glued line), so it is read through the row there rather than
	// kept in every key: the keys stay 24 bytes.
	msg func(*T) uint8
}

// msgOf is row's msg_index (0 when s has no msg).
func (s *sortedRows[T]) msgOf(row *T) uint8 {
	if s.msg == nil {
		return 0
	}
	return s.msg(row)
}

// add collects row, keyed by (ns, line). The keys double when full: past
// a few hundred kilobytes append grows a slice by a quarter, so a slice's
// engine read (about 0.8M keys at incident-2026 scale 2) was copied to a
// fresh, zeroed array some forty times (BenchmarkSortedRowsAdd).
func (s *sortedRows[T]) add(ns, line uint64, row *T) {
	s.keys = roomFor(s.keys, 1)
	s.keys = append(s.keys, rowKey[T]{ns: ns, line: line, row: row})
}

// each sorts the rows by time, then tie, then line id and message, and
// calls fn on each in that order, once per (time, tie, line, message): the
// copies of a row stored twice (ReplacingMergeTree keeps both until a
// merge) are equal in all four and come one after the other (lineAt).
func (s *sortedRows[T]) each(fn func(*T) error) error {
	slices.SortFunc(s.keys, func(a, b rowKey[T]) int {
		if c := cmp.Compare(a.ns, b.ns); c != 0 {
			return c
		}
		if s.tie != nil {
			if c := s.tie(a.row, b.row); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(a.line, b.line); c != 0 {
			return c
		}
		return cmp.Compare(s.msgOf(a.row), s.msgOf(b.row))
	})
	var last lineAt
	var prev *T
	for _, k := range s.keys {
		if last.repeats(k.ns, k.line, s.msgOf(k.row)) && (s.tie == nil || s.tie(prev, k.row) == 0) {
			continue
		}
		prev = k.row
		if err := fn(k.row); err != nil {
			return err
		}
	}
	return nil
}

// roomFor returns s with room for n more elements, doubling its capacity
// when it has too little: append grows a large slice by a quarter, so a
// slice filled to megabytes is copied to fresh, zeroed arrays dozens of
// times on the way.
func roomFor[E any](s []E, n int) []E {
	if cap(s)-len(s) < n {
		s = slices.Grow(s, max(n, len(s)))
	}
	return s
}
