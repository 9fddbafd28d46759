package domain

import (
	"reflect"
	"testing"
	"time"
)

// A digest stands for a set of rows: the order they are added in does not
// change it, and a change to any one column of any row does.
func TestFactDigest(t *testing.T) {
	row := func(i int) FactRow {
		return FactRow{Key: "req-" + string(rune('a'+i)), Tenant: "t1", Model: "m", GatewayID: "req", TS: time.Unix(1_700_000_000, int64(i)),
			Room: 7, Status: 200, Prompt: 10, Completion: 5, Cached: 2, TTFTMs: 31.5, DurationMs: 90.25,
			PrefillNode: "p0", PrefillRID: "rp", PrefillFinish: "stop", PrefillRank: 1, PrefillPrompt: 10, PrefillLimit: 100,
			DecodeNode: "d0", DecodeRID: "rd", DecodeFinish: "length", DecodeRank: 0, DecodePrompt: 10,
			Reason: "", Links: "gw,prefill,decode", Lines: []uint64{1, 2, 3}}
	}
	digest := func(rows ...FactRow) FactDigest {
		var d FactDigest
		var buf []byte
		for i := range rows {
			buf = d.Add(&rows[i], buf)
		}
		return d
	}
	a, b, c := row(0), row(1), row(2)
	want := digest(a, b, c)
	if got := digest(c, a, b); got != want {
		t.Errorf("order changed the digest: %+v against %+v", got, want)
	}
	if want.N != 3 {
		t.Errorf("N = %d, want 3", want.N)
	}
	// Each column in turn: set it to a different value in one row.
	typ := reflect.TypeOf(FactRow{})
	for i := 0; i < typ.NumField(); i++ {
		t.Run(typ.Field(i).Name, func(t *testing.T) {
			changed := b
			changed.Lines = append([]uint64(nil), b.Lines...)
			f := reflect.ValueOf(&changed).Elem().Field(i)
			switch f.Kind() {
			case reflect.String:
				f.SetString(f.String() + "x")
			case reflect.Uint8, reflect.Uint16, reflect.Uint64:
				f.SetUint(f.Uint() + 1)
			case reflect.Int16:
				f.SetInt(f.Int() + 1)
			case reflect.Float64:
				f.SetFloat(f.Float() + 0.5)
			case reflect.Slice:
				changed.Lines = append(changed.Lines, 4)
			case reflect.Struct: // time.Time
				changed.TS = changed.TS.Add(time.Nanosecond)
			default:
				t.Fatalf("column of kind %s not covered", f.Kind())
			}
			if got := digest(a, changed, c); got == want {
				t.Errorf("a changed %s left the digest as it was", typ.Field(i).Name)
			}
		})
	}
	// Strings are length-prefixed: moving a byte from one column to the
	// next is a different row.
	s1, s2 := a, a
	s1.Tenant, s1.Model = "ab", "c"
	s2.Tenant, s2.Model = "a", "bc"
	if digest(s1) == digest(s2) {
		t.Error(`tenant "ab", model "c" and tenant "a", model "bc" have one digest`)
	}
}

// A link made of parts (an analysis job's slices) has the digest of all
// their rows and the span of their times; a part that saved nothing
// changes neither.
func TestFactLinkJoin(t *testing.T) {
	at := func(i int) FactRow {
		return FactRow{Key: "req-" + string(rune('a'+i)), GatewayID: "req", TS: time.Unix(1_700_000_000+int64(i), 0), Lines: []uint64{uint64(i)}}
	}
	rows := []FactRow{at(3), at(1), at(4), at(2)}
	var whole FactLink
	var buf []byte
	for i := range rows {
		buf = whole.Digest.Add(&rows[i], buf)
		whole.Saw(rows[i].TS)
	}
	part := func(rows ...FactRow) FactLink {
		var l FactLink
		for i := range rows {
			buf = l.Digest.Add(&rows[i], buf)
			l.Saw(rows[i].TS)
		}
		return l
	}
	var joined FactLink
	joined.Join(part(rows[3], rows[1])) // the earliest first
	joined.Join(part())                 // an empty slice
	joined.Join(part(rows[2], rows[0]))
	if joined.Digest != whole.Digest || !joined.First.Equal(whole.First) || !joined.Last.Equal(whole.Last) {
		t.Errorf("joined %+v, want %+v", joined, whole)
	}
	var one FactLink
	one.Join(part(rows[0]))
	if one.Digest == whole.Digest {
		t.Error("a part's digest equals the whole's")
	}
}
