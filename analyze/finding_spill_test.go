package analyze

import (
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// TestSliceFindingsComeBackEqual: the slices' findings, held on disk
// (or in memory where TMPDIR cannot take a file) until their analyzer
// concludes, read back equal to what was added, every field, in the
// order added across slices, in batches of the size asked, with nil and
// empty lists and details, zero times and times before 1970 kept apart.
func TestSliceFindingsComeBackEqual(t *testing.T) {
	edges := heldCases()
	old := edges[0]
	old.ID, old.TS, old.FirstTS = "f-1969", time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)
	old.RIDs, old.ForeignTenants, old.Evidence, old.Details = []string{}, []string{}, []uint64{}, map[string]string{}
	old.Confidence = 1e-300
	edges = append(edges, old)
	for _, tt := range spillPlaces {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TMPDIR", tt.tmp(t))
			var s findingSpill
			defer s.close()
			var want []Finding
			for round := range 3 { // three slices
				fs := slices.Clone(edges)
				for i := range fs {
					fs[i].ID += string(rune('a' + round))
				}
				if err := s.add(fs); err != nil {
					t.Fatal(err)
				}
				want = append(want, fs...)
			}
			if err := s.add(nil); err != nil { // a slice that found nothing
				t.Fatal(err)
			}
			var got []Finding
			var sizes []int
			if err := s.each(5, func(fs []Finding) error {
				sizes = append(sizes, len(fs))
				got = append(got, fs...)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if i >= len(got) || !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("finding %d came back as\n%#v\nwant\n%#v", i, at(got, i), want[i])
				}
			}
			// The repeated strings are shared, a finding's own are not.
			a, b := got[0], got[len(edges)] // one finding of two slices
			if unsafe.StringData(a.Tenant) != unsafe.StringData(b.Tenant) || unsafe.StringData(a.DecodeNode) != unsafe.StringData(b.DecodeNode) {
				t.Error("the tenant and node of two findings read back are two copies, not one shared string")
			}
			if a.Title != b.Title || unsafe.StringData(a.Title) == unsafe.StringData(b.Title) {
				t.Error("want equal titles in two copies")
			}
			if len(got) != len(want) || s.spill.n != len(want) {
				t.Fatalf("%d findings back, %d counted, %d added", len(got), s.spill.n, len(want))
			}
			if !slices.Equal(sizes, []int{5, 5, 2}) {
				t.Errorf("batches of %v, want 5, 5, 2", sizes)
			}
			if (s.spill.f != nil) != tt.onDisk {
				t.Errorf("on disk %v, want %v", s.spill.f != nil, tt.onDisk)
			}
		})
	}
}

func at(fs []Finding, i int) any {
	if i < len(fs) {
		return fs[i]
	}
	return "nothing"
}

// A damaged or truncated record is an error, never a panic or a finding
// with fields shifted.
func TestSliceFindingDamageIsAnError(t *testing.T) {
	for _, f := range heldCases() {
		b := encodeFinding(nil, &f)
		if _, err := decodeFinding(b, interner{}); err != nil {
			t.Fatalf("%s: %v", f.ID, err)
		}
		for n := range len(b) {
			if _, err := decodeFinding(b[:n], interner{}); err == nil {
				t.Fatalf("%s cut to %d of %d bytes read back without an error", f.ID, n, len(b))
			}
		}
		if _, err := decodeFinding(append(slices.Clone(b), 0), interner{}); err == nil {
			t.Errorf("%s with a byte left over read back without an error", f.ID)
		}
		for i := range b {
			d := slices.Clone(b)
			d[i] ^= 0xff
			_, _ = decodeFinding(d, interner{}) // may decode to other values; must not panic
		}
	}
}
