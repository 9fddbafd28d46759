package analyze

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
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

// TestHeldFindingsComeBackWhole: held victim findings keep in memory only
// what the reconstruction reads; each gives them back whole, in the order
// held, with the foreign lists as changed while held (after a reorder, as
// withHeld sorts them), in batches of the size asked; on disk and, where
// no temporary file can be made, in memory. It fails if a field of the
// rest is lost or left in memory, or a change made while held is lost.
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
			for _, f := range h.fs {
				if f.Title != "" || f.Explanation != "" || f.GroupKey != "" || f.Subject != "" || f.RIDs != nil || f.Details != nil {
					t.Fatalf("held finding %s keeps its rest in memory: %+v", f.ID, f)
				}
			}
			// The reconstruction reorders them and fills in foreign lists.
			slices.Reverse(h.fs)
			for i := range h.fs {
				if h.fs[i].Analyzer == "over_threshold" {
					h.fs[i].ForeignTenants, h.fs[i].ForeignRequestKeys = []string{"initech"}, []string{"req-9", "req-8"}
				}
			}
			for i := range want {
				if want[i].Analyzer == "over_threshold" {
					want[i].ForeignTenants, want[i].ForeignRequestKeys = []string{"initech"}, []string{"req-9", "req-8"}
				}
				if len(want[i].Details) == 0 {
					want[i].Details = nil
				}
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
			if (h.rest.f != nil) != tt.onDisk {
				t.Fatalf("file %v, want on disk %v", h.rest.f != nil, tt.onDisk)
			}
			if tt.onDisk {
				if left, _ := os.ReadDir(dir); len(left) != 0 {
					t.Fatalf("TMPDIR holds %d entries while the spill is open; its file should be unlinked", len(left))
				}
			}
		})
	}
}

// A held finding whose rest cannot come back (a damaged spill, or a
// record of a finding no longer held) is an error, not a finding stored
// without its text.
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
	if _, err := h.rest.f.WriteAt([]byte{0xff, 0xff}, 8); err != nil {
		t.Fatal(err)
	}
	if err := each(&h); err == nil {
		t.Error("a damaged spill read back without an error")
	}

	var lost heldFindings
	defer lost.close()
	if err := lost.add(heldCases()); err != nil {
		t.Fatal(err)
	}
	lost.fs[1].ID = "f-other"
	if err := each(&lost); err == nil || !strings.Contains(err.Error(), "not held") {
		t.Errorf("a spilled finding no longer held: %v, want an error", err)
	}
	lost.fs = lost.fs[:2]
	if err := each(&lost); err == nil || !strings.Contains(err.Error(), "2 held, 3 spilled") {
		t.Errorf("fewer held than spilled: %v, want an error", err)
	}
}
