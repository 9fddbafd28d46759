package varbin

import (
	"encoding/binary"
	"errors"
	"testing"
)

var errBad = errors.New("bad record")

func TestReaderReadsWhatWasWritten(t *testing.T) {
	b := AppendString(nil, "héllo\x00\n")
	b = binary.AppendUvarint(b, 1<<63)
	b = binary.AppendVarint(b, -42)
	b = append(b, 7)
	b = binary.AppendUvarint(b, 2)
	b = AppendString(AppendString(b, ""), "x")
	b = AppendUvarints(AppendUvarints(b, []uint64{0, 1 << 63, 300}), nil)
	r := NewReader(b, errBad)
	if s := r.Str(); s != "héllo\x00\n" {
		t.Fatalf("Str = %q", s)
	}
	if v := r.Uvarint(); v != 1<<63 {
		t.Fatalf("Uvarint = %d", v)
	}
	if v := r.Varint(); v != -42 {
		t.Fatalf("Varint = %d", v)
	}
	if c := r.Byte(); c != 7 {
		t.Fatalf("Byte = %d", c)
	}
	if n := r.Count(1); n != 2 {
		t.Fatalf("Count = %d", n)
	}
	if a, z := r.Str(), r.Str(); a != "" || z != "x" || r.Err != nil {
		t.Fatalf("%q %q, err %v", a, z, r.Err)
	}
	if vs, none := r.Uvarints(), r.Uvarints(); len(vs) != 3 || vs[0] != 0 || vs[1] != 1<<63 || vs[2] != 300 || none != nil ||
		r.Err != nil || r.Left() != 0 {
		t.Fatalf("Uvarints = %v %v, err %v, %d left", vs, none, r.Err, r.Left())
	}
}

// Damage is the reader's error, it sticks, and later reads give zeros.
func TestReaderDamage(t *testing.T) {
	for _, tt := range []struct {
		name string
		b    []byte
		read func(r *Reader) any
	}{
		{"empty varint", nil, func(r *Reader) any { return r.Uvarint() }},
		{"empty signed varint", nil, func(r *Reader) any { return r.Varint() }},
		{"no byte", nil, func(r *Reader) any { return r.Byte() }},
		{"string longer than the record", binary.AppendUvarint(nil, 5), func(r *Reader) any { return r.Str() }},
		{"count beyond what is left", append(binary.AppendUvarint(nil, 3), 1, 1), func(r *Reader) any { return r.Count(1) }},
		{"count of a billion", binary.AppendUvarint(nil, 1e9), func(r *Reader) any { return r.Count(1) }},
		{"list longer than the record", append(binary.AppendUvarint(nil, 3), 1, 1), func(r *Reader) any { return r.Uvarints() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.b, errBad)
			tt.read(r)
			if !errors.Is(r.Err, errBad) {
				t.Fatalf("err %v, want the reader's", r.Err)
			}
			if v := r.Uvarint(); v != 0 || r.Str() != "" || r.Count(1) != 0 || !errors.Is(r.Err, errBad) {
				t.Fatal("a read after the error gave something")
			}
		})
	}
}
