package chblock

import (
	"slices"
	"sync"

	"github.com/ClickHouse/ch-go/proto"
)

// Encode buffers are made room for once per block and reused across
// connections. ch-go appends a column's values one by one, so a block's
// buffer grew from empty by repeated copying: in a profiled analysis of
// the incident-2026 scale-100 window, growing the column encodings cost
// the reconstruction 23 of its 106 CPU-seconds (the findings and their
// 4M lookup keys), most of it the garbage collector's assists for the
// abandoned copies.

// wireBufs keeps the encode buffers of finished connections for the next
// one. Each query and each INSERT dials its own connection, whose buffer
// otherwise started empty.
var wireBufs sync.Pool

// maxPooledBuf is the largest buffer kept: an ingest block or a key list
// is well under it, while a rare block of hundreds of megabytes (a
// notification list's arrays at incident scale) is left to the collector
// rather than held by the pool until the next two collections.
const maxPooledBuf = 32 << 20

// takeBuf returns an empty buffer, with the capacity of a pooled one when
// there is one.
func takeBuf() []byte {
	if p, ok := wireBufs.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return nil
}

// putBuf hands b back for another connection; b must not be used after.
func putBuf(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooledBuf {
		return
	}
	b = b[:0]
	wireBufs.Put(&b)
}

// release returns the client's buffers to the pool once its connection is
// done with: nothing of c may write to them after.
func (c *client) release() {
	putBuf(c.buf.Buf)
	putBuf(c.raw)
	c.buf.Buf, c.raw = nil, nil
}

// grown returns b with room for col encoded in a block (its name, type
// and values).
func grown(b []byte, col proto.InputColumn) []byte {
	return slices.Grow(b, len(col.Name)+len(col.Data.Type())+16+columnSize(col.Data))
}

// columnSize is about what c encodes to: what a column that knows says
// (EncodedSize), exact for strings (at most 5 bytes of length each) and
// arrays of them, 8 bytes a row for the
// fixed-width columns (an over-estimate for the narrow ones), and a guess a
// LowCardinality column's dictionary may exceed (the buffer then grows as
// before).
func columnSize(c proto.ColInput) int {
	switch c := c.(type) {
	case interface{ EncodedSize() int }:
		return c.EncodedSize()
	case *proto.ColStr:
		return len(c.Buf) + 5*len(c.Pos)
	case *proto.ColArr[string]:
		return 8*len(c.Offsets) + columnSize(c.Data)
	case *proto.ColArr[uint64]:
		return 8*len(c.Offsets) + columnSize(c.Data)
	case *proto.ColArr[uint32]:
		return 8*len(c.Offsets) + columnSize(c.Data)
	}
	return 8 * c.Rows()
}
