package chstore

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type sortRow struct {
	ns, line uint64
	msg      uint8
	id       string
}

func msgOf(r *sortRow) uint8 { return r.msg }

func byID(a, b *sortRow) int { return strings.Compare(a.id, b.id) }

// TestSortedRows: rows come back in (ns, tie, line) order whatever order
// they were read in, a row repeated in all three keys once, at stable
// addresses across chunks.
func TestSortedRows(t *testing.T) {
	tests := []struct {
		name string
		tie  func(a, b *sortRow) int
		msg  func(*sortRow) uint8
		in   []sortRow
		want []sortRow
	}{
		{
			name: "time then line",
			in:   []sortRow{{ns: 5, line: 2}, {ns: 1, line: 9}, {ns: 5, line: 1}, {ns: 3, line: 4}},
			want: []sortRow{{ns: 1, line: 9}, {ns: 3, line: 4}, {ns: 5, line: 1}, {ns: 5, line: 2}},
		},
		{
			name: "a line stored twice, apart in the read, once",
			in:   []sortRow{{ns: 5, line: 2}, {ns: 1, line: 9}, {ns: 5, line: 2}, {ns: 1, line: 9}, {ns: 1, line: 9}},
			want: []sortRow{{ns: 1, line: 9}, {ns: 5, line: 2}},
		},
		{
			name: "same line id at two times is two rows",
			in:   []sortRow{{ns: 6, line: 2}, {ns: 5, line: 2}},
			want: []sortRow{{ns: 5, line: 2}, {ns: 6, line: 2}},
		},
		{
			name: "a tie orders before the line id",
			tie:  byID,
			in:   []sortRow{{ns: 5, line: 1, id: "b"}, {ns: 5, line: 2, id: "a"}, {ns: 4, line: 3, id: "z"}},
			want: []sortRow{{ns: 4, line: 3, id: "z"}, {ns: 5, line: 2, id: "a"}, {ns: 5, line: 1, id: "b"}},
		},
		{
			name: "same time and line, different tie: both",
			tie:  byID,
			in:   []sortRow{{ns: 5, line: 1, id: "b"}, {ns: 5, line: 1, id: "a"}, {ns: 5, line: 1, id: "b"}},
			want: []sortRow{{ns: 5, line: 1, id: "a"}, {ns: 5, line: 1, id: "b"}},
		},
		{
			name: "two messages of one glued line, one of them stored twice: both, each once, in message order",
			msg:  msgOf,
			in:   []sortRow{{ns: 5, line: 1, msg: 1}, {ns: 5, line: 1, msg: 0}, {ns: 5, line: 1, msg: 1}},
			want: []sortRow{{ns: 5, line: 1, msg: 0}, {ns: 5, line: 1, msg: 1}},
		},
		{
			name: "nothing read",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sortedRows[sortRow]{tie: tt.tie, msg: tt.msg}
			for _, r := range tt.in {
				s.add(r.ns, r.line, &r)
			}
			var got []sortRow
			if err := s.each(func(r *sortRow) error { got = append(got, *r); return nil }); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSortedRowsShuffled: many rows in a shuffled read, a quarter of them
// twice, come back sorted and each once.
func TestSortedRowsShuffled(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 5000
	var in []sortRow
	for i := range n {
		in = append(in, sortRow{ns: uint64(rng.IntN(n / 3)), line: uint64(i)})
	}
	in = append(in, in[:n/4]...) // a quarter stored twice
	rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })

	s := sortedRows[sortRow]{}
	for _, r := range in {
		s.add(r.ns, r.line, &r)
	}
	var kept []*sortRow
	if err := s.each(func(r *sortRow) error { kept = append(kept, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(kept) != n {
		t.Fatalf("%d rows handed out, want %d (each once)", len(kept), n)
	}
	if !slices.IsSortedFunc(kept, func(a, b *sortRow) int {
		return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.line, b.line))
	}) {
		t.Fatal("rows not in (ns, line) order")
	}
	seen := map[uint64]bool{}
	for _, r := range kept {
		if seen[r.line] {
			t.Fatalf("line %d handed out twice", r.line)
		}
		seen[r.line] = true
	}
}

// TestSortedRowsCallbackError: a callback's error ends the walk and comes
// back as is.
func TestSortedRowsCallbackError(t *testing.T) {
	s := sortedRows[sortRow]{}
	for i := range 3 {
		s.add(uint64(i), uint64(i), &sortRow{ns: uint64(i), line: uint64(i)})
	}
	stop := errors.New("enough")
	calls := 0
	err := s.each(func(*sortRow) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("got %v after %d calls, want %v after 1", err, calls, stop)
	}
}

// BenchmarkSortedRowsAdd collects as many keys as a slice's engine read at
// incident-2026 scale 2.
func BenchmarkSortedRowsAdd(b *testing.B) {
	const n = 774_249
	row := &sortRow{}
	b.ReportAllocs()
	for b.Loop() {
		s := sortedRows[sortRow]{}
		for i := range n {
			s.add(uint64(i), uint64(i), row)
		}
	}
}
