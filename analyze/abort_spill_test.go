package analyze

import (
	"math"
	"os"
	"reflect"
	"testing"
	"time"
)

// spillCases are abort cases with every field set, and the edges: no
// candidates, empty strings and lists, a zero time, extreme numbers, text
// with newlines, NULs and non-ASCII.
func spillCases() []abortCase {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 123456789, time.UTC)
	full := &TransferEvent{TS: t0, Node: "decode-3", Role: "decode", DPRank: 7, Source: "mooncake", Event: "decode_transfer_failed",
		RID: "rid-1", Room: 1<<63 - 1, OtherRoom: 42, MetaIndex: -5, Reason: "Aborted by AbortReq", Peer: "10.0.0.1:1", NIC: "mlx5_0", Line: math.MaxUint64, Msg: 3}
	cand := abortCand{room: 9, at: t0.UnixNano(), end: t0.Add(time.Minute).UnixNano(), ts: 1, first: -1, last: math.MaxInt64, rank: -1,
		success: true, key: "req-1", gwID: "gw-1", tenant: "acme", prefill: "prefill-0", decode: "decode-3", links: "gateway,prefill,decode",
		rids: []string{"p-1", "d-1"}, lines: []uint64{1, 2, math.MaxUint64}}
	bare := abortCand{key: "req-2"}
	odd := abortCand{room: 3, key: "a,b\n\x00c", tenant: "tenant \u00e9\u4e2d", rids: []string{"", "x"}}
	return []abortCase{
		{t: full, src: abortSrc{key: "src", gwID: "gw-src", tenant: "globex", lines: []uint64{5, 6}}, rank: 7,
			cands: []abortCand{cand, bare, odd}, released: t0.Add(30 * time.Second).UnixNano(), releasedLine: math.MaxUint64 - 1},
		{t: &TransferEvent{}, src: abortSrc{}, rank: 0},
		{t: &TransferEvent{Node: "decode-0", Room: 1}, src: abortSrc{key: "only"}, rank: -1, cands: []abortCand{bare}},
		// Candidates as small as they come: the length check of the list
		// must let them through.
		{t: &TransferEvent{}, cands: make([]abortCand, 5)},
	}
}

func TestAbortCaseRoundTrip(t *testing.T) {
	// Every field of the first case is set, so a field the codec leaves
	// out (one added later, say) comes back zero and fails the comparison.
	c := spillCases()[0]
	for _, v := range []any{c, *c.t, c.src, c.cands[0]} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			if rv.Field(i).IsZero() {
				t.Fatalf("%T.%s is zero in the full case: set it, and spill it", v, rv.Type().Field(i).Name)
			}
		}
	}
	for i, c := range spillCases() {
		got, err := decodeAbortCase(encodeAbortCase(nil, &c))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("case %d came back as\n%+v (%+v)\nwant\n%+v (%+v)", i, got, *got.t, c, *c.t)
		}
	}
}

// A case cut anywhere, or with bytes after it, is an error, not a panic or
// a case.
func TestAbortCaseDecodeRejectsDamage(t *testing.T) {
	c := spillCases()[0]
	b := encodeAbortCase(nil, &c)
	for n := 0; n < len(b); n++ {
		if _, err := decodeAbortCase(b[:n]); err == nil {
			t.Fatalf("the first %d of %d bytes decoded", n, len(b))
		}
	}
	if _, err := decodeAbortCase(append(b, 0)); err == nil {
		t.Fatal("a trailing byte was accepted")
	}
}

// spillPlaces are where a spill may go: a file in TMPDIR, or memory when
// TMPDIR cannot take one.
var spillPlaces = []struct {
	name   string
	tmp    func(t *testing.T) string
	onDisk bool
}{
	{"on disk", func(t *testing.T) string { return t.TempDir() }, true},
	{"in memory", func(t *testing.T) string { return "/nonexistent/kvtrail-no-such-dir" }, false},
}

// The spill gives the cases back in the order they came, again after more
// are added (a worker's state is read, then the finishing worker adds the
// others' cases), on disk, leaving no file in TMPDIR, and in memory when
// TMPDIR cannot take a file.
func TestAbortSpillKeepsTheCasesInOrder(t *testing.T) {
	for _, tt := range spillPlaces {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.tmp(t)
			t.Setenv("TMPDIR", dir)
			cases := spillCases()
			var s abortSpill
			defer s.close()
			read := func() []abortCase {
				var out []abortCase
				if err := s.each(func(c abortCase) error { out = append(out, c); return nil }); err != nil {
					t.Fatal(err)
				}
				return out
			}
			if got := read(); len(got) != 0 {
				t.Fatalf("an empty spill gave %d cases", len(got))
			}
			var want []abortCase
			for round := 0; round < 3; round++ {
				for i := range cases {
					c := cases[(i+round)%len(cases)]
					if err := s.add(&c); err != nil {
						t.Fatal(err)
					}
					want = append(want, c)
				}
				if got := read(); !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d: %d cases back, not the %d added in order", round, len(got), len(want))
				}
			}
			if (s.f != nil) != tt.onDisk {
				t.Fatalf("file %v, want on disk %v", s.f != nil, tt.onDisk)
			}
			if tt.onDisk {
				if left, _ := os.ReadDir(dir); len(left) != 0 {
					t.Fatalf("TMPDIR holds %d entries while the spill is open; its file should be unlinked", len(left))
				}
			}
			s.close()
			if got := read(); len(got) != 0 {
				t.Fatalf("a closed spill gave %d cases", len(got))
			}
		})
	}
}

// A spill file damaged under the analysis (a length gone huge, a case's
// bytes changed, the file cut short) is an error from each, not a panic,
// an allocation of the length or a different case.
func TestAbortSpillDamageIsAnError(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	for _, tt := range []struct {
		name   string
		damage []byte
		at     int64
	}{
		{"length", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, 0},
		{"case", []byte{0xff, 0xff, 0xff}, 9},
		{"cut short", nil, -2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s abortSpill
			defer s.close()
			for _, c := range spillCases() {
				if err := s.add(&c); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.each(func(abortCase) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if s.f == nil {
				t.Fatal("no spill file")
			}
			var err error
			if tt.at < 0 {
				err = s.f.Truncate(s.size + tt.at)
			} else {
				_, err = s.f.WriteAt(tt.damage, tt.at)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := s.each(func(abortCase) error { return nil }); err == nil {
				t.Fatal("a damaged spill read back without an error")
			}
		})
	}
}
