// Package varbin writes and reads the compact binary records kvtrail keeps
// on local disk (the push spool's records, the analysis's spilled records):
// varints and length-prefixed strings, read back with one sticky error so
// that a damaged record is an error, never a panic or a huge allocation.
package varbin

import "encoding/binary"

// AppendString appends s with its length before it.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Reader reads a record. Its first error sticks: later reads return zeros,
// and Err is what the caller reports.
type Reader struct {
	b       []byte
	corrupt error
	Err     error
}

// NewReader reads b; corrupt is the error a damaged record gives.
func NewReader(b []byte, corrupt error) *Reader { return &Reader{b: b, corrupt: corrupt} }

// Left is how many bytes are not read yet.
func (r *Reader) Left() int { return len(r.b) }

func (r *Reader) fail() { r.Err = r.corrupt }

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 { return number(r, binary.Uvarint) }

// Varint reads a signed varint.
func (r *Reader) Varint() int64 { return number(r, binary.Varint) }

func number[T uint64 | int64](r *Reader, read func([]byte) (T, int)) T {
	if r.Err != nil {
		return 0
	}
	v, n := read(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.Err != nil || len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// Str reads what AppendString wrote.
func (r *Reader) Str() string { return string(r.StrBytes()) }

// StrBytes reads what AppendString wrote without copying it: the bytes
// are b's own, valid as long as b is.
func (r *Reader) StrBytes() []byte {
	n := r.Uvarint()
	if r.Err != nil || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}

// Count reads a list's length, which must fit in what is left at no less
// than min bytes an element, so that a damaged count cannot make the
// reader allocate gigabytes.
func (r *Reader) Count(min uint64) int {
	n := r.Uvarint()
	if r.Err == nil && n > uint64(len(r.b))/min {
		r.fail()
	}
	if r.Err != nil {
		return 0
	}
	return int(n)
}

// AppendUvarints appends vs with its length before it.
func AppendUvarints(b []byte, vs []uint64) []byte {
	b = binary.AppendUvarint(b, uint64(len(vs)))
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// Uvarints reads what AppendUvarints wrote; an empty list comes back nil.
func (r *Reader) Uvarints() []uint64 {
	n := r.Count(1)
	if n == 0 {
		return nil
	}
	vs := make([]uint64, n)
	for i := range vs {
		vs[i] = r.Uvarint()
	}
	return vs
}

// AppendListLen appends a list's length plus one, or 0 for a nil list,
// so that a reader tells a nil list from an empty one (ListLen).
func AppendListLen(b []byte, n int, isNil bool) []byte {
	if isNil {
		return binary.AppendUvarint(b, 0)
	}
	return binary.AppendUvarint(b, uint64(n)+1)
}

// ListLen reads what AppendListLen wrote: -1 for a nil list. As with
// Count, the length must fit in what is left at no less than min bytes an
// element.
func (r *Reader) ListLen(min uint64) int {
	n := r.Uvarint()
	if r.Err != nil || n == 0 {
		return -1
	}
	if n-1 > uint64(len(r.b))/min {
		r.fail()
		return -1
	}
	return int(n - 1)
}
