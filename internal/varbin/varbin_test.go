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
	if a, z := r.Str(), r.Str(); a != "" || z != "x" || r.Err != nil || r.Left() != 0 {
		t.Fatalf("%q %q, err %v, %d left", a, z, r.Err, r.Left())
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
