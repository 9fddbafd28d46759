package analyze

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// heldCases are victim findings with every field set, and the edges:
// empty text and lists, no details, text with newlines, NULs and
// non-ASCII.
func heldCases() []Finding {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	full := Finding{ID: "f-full", RunID: "run-1", Analyzer: "rejected_served", AnalyzerVersion: "3", Severity: High, Confidence: 0.97,
		TS: t0, FirstTS: t0.Add(-time.Minute), LastTS: t0.Add(time.Minute), RequestKey: "req-1", GatewayRequestID: "gw-1",
		Tenant: "acme", Room: 1<<63 - 1, PrefillNode: "prefill-0", DecodeNode: "decode-3", DecodeDPRank: 7,
		RIDs: []string{"p-1", "d-1"}, Title: "served from a rejected prefill", Explanation: "the prefill rejected\nthe prompt",
		GroupKey: "decode-3/7", ForeignTenants: []string{"globex"}, ForeignRequestKeys: []string{"req-0"},
		Evidence: []uint64{1, 2, 3}, Details: map[string]string{"pool_tokens": "681280", "prompt_tokens": "700000", "": "empty key"},
		Subject: "req-1"}
	odd := Finding{ID: "f-odd", Analyzer: "transfer_mismatch", Severity: High, RequestKey: "a,b\n\x00c",
		Tenant: "tenant \u00e9\u4e2d", Title: "\x00", Explanation: strings.Repeat("long ", 10_000), RIDs: []string{"", "x"},
		Details: map[string]string{"k": ""}}
	bare := Finding{ID: "f-bare", Analyzer: "over_threshold", Severity: High, RequestKey: "req-2"}
	return []Finding{full, odd, bare}
}

// TestHeldFindingsComeBackWhole: held victim findings wait whole on local
// disk, or in memory where no temporary file can be made; each gives them
// back equal to what was added, in that order, in batches of the size
// asked. What stays in the heap is the victims' rooms. It fails if a field
// is lost, the order changes, or the spill's file is left in TMPDIR.
func TestHeldFindingsComeBackWhole(t *testing.T) {
	for _, tt := range spillPlaces {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.tmp(t)
			t.Setenv("TMPDIR", dir)
			var h heldFindings
			defer h.close()
			var want []Finding
			for round := range 3 {
				batch := heldCases()
				for i := range batch {
					batch[i].ID += string(rune('a' + round))
				}
				if err := h.add(batch); err != nil {
					t.Fatal(err)
				}
				want = append(want, batch...)
			}
			if h.len() != len(want) {
				t.Fatalf("%d held, want %d", h.len(), len(want))
			}
			var got []Finding
			var sizes []int
			if err := h.each(2, func(fs []Finding) error {
				sizes = append(sizes, len(fs))
				got = append(got, fs...)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("held findings came back as\n%+v\nwant\n%+v", got, want)
			}
			if !slices.Equal(sizes, []int{2, 2, 2, 2, 1}) {
				t.Errorf("batches of %v, want of at most 2", sizes)
			}
			// The three victim requests, once each, with their findings counted.
			if !slices.Equal(h.rooms.keys, []string{"req-1", "a,b\n\x00c", "req-2"}) || !slices.Equal(h.rooms.findings, []int32{3, 3, 3}) {
				t.Errorf("victims noted %q with %v findings", h.rooms.keys, h.rooms.findings)
			}
			if (h.findings.spill.f != nil) != tt.onDisk {
				t.Fatalf("file %v, want on disk %v", h.findings.spill.f != nil, tt.onDisk)
			}
			if tt.onDisk {
				if left, _ := os.ReadDir(dir); len(left) != 0 {
					t.Fatalf("TMPDIR holds %d entries while the spill is open; its file should be unlinked", len(left))
				}
			}
		})
	}
}

// A held finding that cannot come back whole (a damaged spill) is an
// error, not a finding stored without its text.
func TestHeldFindingsDamageIsAnError(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	each := func(h *heldFindings) error { return h.each(10, func([]Finding) error { return nil }) }
	var h heldFindings
	defer h.close()
	if err := h.add(heldCases()); err != nil {
		t.Fatal(err)
	}
	if err := each(&h); err != nil {
		t.Fatal(err)
	}
	if _, err := h.findings.spill.f.WriteAt([]byte{0xff, 0xff}, 8); err != nil {
		t.Fatal(err)
	}
	if err := each(&h); err == nil {
		t.Error("a damaged spill read back without an error")
	}
}

// TestVictimRoomsTakeTheFirstFindingsRoom: a victim's room is that of
// its first finding in the order the reconstruction sorts them
// (analyzer, time, id), whatever order they were added in, as
// collectVictims takes it; rejected_served and over_threshold mark its
// room a placeholder; findings below their analyzer's victim severity
// note nothing; rooms 0 and those with page events are not replayed.
func TestVictimRoomsTakeTheFirstFindingsRoom(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	fs := []Finding{
		{ID: "c", Analyzer: "transfer_mismatch", Severity: High, RequestKey: "r1", Room: 30, TS: t0},
		{ID: "b", Analyzer: "rejected_served", Severity: High, RequestKey: "r1", Room: 20, TS: t0.Add(time.Second)},
		{ID: "a", Analyzer: "rejected_served", Severity: High, RequestKey: "r1", Room: 10, TS: t0.Add(time.Second)},
		{ID: "d", Analyzer: "transfer_mismatch", Severity: High, RequestKey: "r2", Room: 40, TS: t0},
		{ID: "e", Analyzer: "transfer_mismatch", Severity: Low, RequestKey: "r3", Room: 50, TS: t0},
		{ID: "f", Analyzer: "transfer_mismatch", Severity: High, RequestKey: "r4", TS: t0},
		{ID: "g", Analyzer: "transfer_mismatch", Severity: High, RequestKey: "r5", Room: 60, TS: t0},
	}
	d := &Dataset{ByKey: map[string]*Fact{"r5": {Key: "r5", Decode: &domain.Side{Node: "decode-pages"}}}}
	pr := &pageReplay{Nodes: map[string]bool{"decode-pages": true}}
	for _, order := range [][]int{{0, 1, 2, 3, 4, 5, 6}, {6, 5, 4, 3, 2, 1, 0}, {2, 0, 6, 1, 3, 5, 4}} {
		var v victimRooms
		var sorted []Finding
		for _, i := range order {
			v.add(&fs[i])
			sorted = append(sorted, fs[i])
		}
		want, placeholder := v.wants(d, pr)
		if !reflect.DeepEqual(want, map[uint64]bool{10: true, 40: true}) || !reflect.DeepEqual(placeholder, map[uint64]bool{10: true}) {
			t.Errorf("added in order %v: want %v, placeholder %v; want rooms 10 and 40, placeholder 10", order, want, placeholder)
		}
		domain.SortFindings(sorted)
		victims, _, _ := collectVictims(d, sorted, nil)
		if victims["r1"].room != 10 {
			t.Errorf("collectVictims took room %d for r1, victimRooms 10", victims["r1"].room)
		}
		slices.Reverse(sorted)
		if victims, _, _ := collectVictims(d, sorted, nil); victims["r1"].room != 10 {
			t.Errorf("collectVictims on findings in reverse took room %d for r1, want 10", victims["r1"].room)
		}
	}
}

// TestVictimGroupsKeepARoomTogether: the reconstruction's groups take
// whole victims (all their findings) and whole rooms (every victim of a
// room: they share its lineage), close past the size asked, and follow
// the victims' decode node and time, so the fallback reads each node's
// requests about once. It fails if a room's victims are parted, a group
// ends before its size with more to come, or the order is another.
func TestVictimGroupsKeepARoomTogether(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	f := func(id, key string, room uint64, m int) Finding {
		return Finding{ID: id, Analyzer: "transfer_mismatch", Severity: High, RequestKey: key, Room: room, TS: at(m)}
	}
	d := &Dataset{ByKey: map[string]*Fact{}}
	for key, node := range map[string]string{"a": "decode-0", "b": "decode-1", "c": "decode-0", "d": "decode-1", "e": "decode-0", "z": "decode-1"} {
		d.ByKey[key] = &Fact{Key: key, Decode: &domain.Side{Node: node}}
	}
	vs := &victimSet{}
	for _, x := range []Finding{
		f("1", "a", 7, 5), f("2", "a", 7, 6), // a: two findings
		f("3", "b", 7, 1), // b shares a's room on another node: one unit
		f("4", "c", 0, 2), f("5", "d", 9, 3), f("6", "e", 0, 1), f("7", "z", 11, 0),
	} {
		vs.rooms.add(&x)
	}
	vs.group(d, 2)
	group := map[string]int32{}
	for i, k := range vs.rooms.keys {
		group[k] = vs.groupOf[i]
	}
	// Units by (node, time): e (decode-0, 1), c (decode-0, 2), {a, b}
	// placed by a (decode-0, 5), z (decode-1, 0), d (decode-1, 3). Two
	// findings a group at least: {e, c}, {a, b} (three), {z, d}.
	want := map[string]int32{"e": 0, "c": 0, "a": 1, "b": 1, "z": 2, "d": 2}
	if !maps.Equal(group, want) || vs.groups != 3 {
		t.Errorf("groups %v (%d), want %v (3)", group, vs.groups, want)
	}
	vs.group(d, 1<<30)
	if vs.groups != 1 || slices.Max(vs.groupOf) != 0 {
		t.Errorf("one group asked: %d groups", vs.groups)
	}
}
