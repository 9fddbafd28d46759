package chblock

import (
	"fmt"

	"github.com/ClickHouse/ch-go/proto"
)

// Str is a column of String or LowCardinality(String), whichever the
// server sends, read without a new string per row where the values repeat.
//
// ch-go's ColLowCardinality copies its dictionary entry into a new string
// for every row; here each distinct dictionary value is one string, shared
// by every row and every block that holds it. A plain String column with
// Intern set (tenants, endpoints: a few distinct values in millions of
// rows) is shared the same way, up to internMax distinct values, past which
// new values are allocated as usual. Values handed out stay valid after
// the next block is decoded.
type Str struct {
	// Intern shares the repeated values of a plain String column.
	Intern bool

	lc    bool
	plain proto.ColStr // the rows of a String column; a LowCardinality column's dictionary
	keys  []int        // LowCardinality: each row's dictionary position
	dict  []string     // LowCardinality: the dictionary's values
	k8    proto.ColUInt8
	k16   proto.ColUInt16
	k32   proto.ColUInt32
	k64   proto.ColUInt64
	seen  map[string]string
}

// internMax bounds the strings a column shares: a hostile or simply
// high-cardinality column must not grow the table without end.
const internMax = 4096

const lcString proto.ColumnType = "LowCardinality(String)"

// Infer takes the type the server announced for the column.
func (s *Str) Infer(t proto.ColumnType) error {
	switch t {
	case proto.ColumnTypeString:
		s.lc = false
	case lcString:
		s.lc = true
	default:
		return fmt.Errorf("column type %s: want String or LowCardinality(String)", t)
	}
	return nil
}

// Type is the column's type as last inferred.
func (s *Str) Type() proto.ColumnType {
	if s.lc {
		return lcString
	}
	return proto.ColumnTypeString
}

// Rows is the number of rows decoded or appended.
func (s *Str) Rows() int {
	if s.lc {
		return len(s.keys)
	}
	return s.plain.Rows()
}

// Reset empties the column for the next block; shared values are kept.
func (s *Str) Reset() {
	s.plain.Reset()
	s.keys = s.keys[:0]
	s.dict = s.dict[:0]
}

// Append adds a row (the driver's row-at-a-time path, which fills the same
// columns): it is stored as a plain String.
func (s *Str) Append(v string) {
	s.lc = false
	s.plain.Append(v)
}

// Row returns row i's value.
func (s *Str) Row(i int) string {
	if s.lc {
		return s.dict[s.keys[i]]
	}
	if s.Intern {
		return s.share(s.plain.RowBytes(i))
	}
	return s.plain.Row(i)
}

// share returns b as a string, the same string for the same bytes while the
// table has room.
func (s *Str) share(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if v, ok := s.seen[string(b)]; ok { // no allocation for the lookup
		return v
	}
	v := string(b)
	if s.seen == nil {
		s.seen = make(map[string]string)
	}
	if len(s.seen) < internMax {
		s.seen[v] = v
	}
	return v
}

// DecodeState reads a LowCardinality column's key serialization version,
// the only one ClickHouse writes (shared dictionaries with additional keys).
func (s *Str) DecodeState(r *proto.Reader) error {
	if !s.lc {
		return nil
	}
	v, err := r.Int64()
	if err != nil {
		return fmt.Errorf("low cardinality version: %w", err)
	}
	if v != 1 {
		return fmt.Errorf("low cardinality key serialization %d, want 1", v)
	}
	return nil
}

// Bits of a LowCardinality block's meta word (ClickHouse's
// SerializationLowCardinality).
const (
	lcKeyMask       = 0xff
	lcGlobalDict    = 1 << 8
	lcAdditionalKey = 1 << 9
)

// DecodeColumn reads rows rows of the column.
func (s *Str) DecodeColumn(r *proto.Reader, rows int) error {
	if !s.lc {
		return s.plain.DecodeColumn(r, rows)
	}
	if rows == 0 {
		return nil
	}
	meta, err := r.Int64()
	if err != nil {
		return fmt.Errorf("low cardinality meta: %w", err)
	}
	if meta&lcGlobalDict != 0 || meta&lcAdditionalKey == 0 {
		return fmt.Errorf("low cardinality meta %#x: only per-block dictionaries are read", meta)
	}
	n, err := r.Int64()
	if err != nil {
		return fmt.Errorf("low cardinality dictionary size: %w", err)
	}
	if n < 0 || n > 1<<30 {
		return fmt.Errorf("low cardinality dictionary size %d", n)
	}
	if err := s.plain.DecodeColumn(r, int(n)); err != nil {
		return fmt.Errorf("low cardinality dictionary: %w", err)
	}
	s.dict = s.dict[:0]
	for i := 0; i < int(n); i++ {
		s.dict = append(s.dict, s.share(s.plain.RowBytes(i)))
	}
	m, err := r.Int64()
	if err != nil {
		return fmt.Errorf("low cardinality keys size: %w", err)
	}
	if m != int64(rows) {
		return fmt.Errorf("low cardinality: %d keys for %d rows", m, rows)
	}
	s.keys = s.keys[:0]
	switch meta & lcKeyMask {
	case 0:
		s.keys, err = keysOf[proto.ColUInt8, uint8](r, rows, &s.k8, s.keys)
	case 1:
		s.keys, err = keysOf[proto.ColUInt16, uint16](r, rows, &s.k16, s.keys)
	case 2:
		s.keys, err = keysOf[proto.ColUInt32, uint32](r, rows, &s.k32, s.keys)
	case 3:
		s.keys, err = keysOf[proto.ColUInt64, uint64](r, rows, &s.k64, s.keys)
	default:
		return fmt.Errorf("low cardinality key type %d", meta&lcKeyMask)
	}
	if err != nil {
		return err
	}
	for _, k := range s.keys {
		if k < 0 || k >= len(s.dict) {
			return fmt.Errorf("low cardinality key %d outside a dictionary of %d", k, len(s.dict))
		}
	}
	return nil
}

// keysOf decodes rows keys into col and appends them to dst.
func keysOf[C ~[]K, K uint8 | uint16 | uint32 | uint64, P interface {
	*C
	DecodeColumn(*proto.Reader, int) error
	Reset()
}](r *proto.Reader, rows int, col P, dst []int) ([]int, error) {
	col.Reset()
	if err := col.DecodeColumn(r, rows); err != nil {
		return dst, fmt.Errorf("low cardinality keys: %w", err)
	}
	for _, k := range *col {
		dst = append(dst, int(k))
	}
	return dst, nil
}
