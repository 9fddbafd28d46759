package chblock

import (
	"strings"
	"testing"

	"github.com/ClickHouse/ch-go/proto"
)

// TestGrownHoldsTheBlock: the room made before encoding a column holds it,
// for the column kinds kvtrail's big inserts send (strings, arrays of
// strings and of line ids, fixed-width numbers), so encoding never grows
// the buffer again; and a buffer handed back comes out empty.
func TestGrownHoldsTheBlock(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows int
		str  func(i int) string
	}{
		{"empty strings", 1000, func(int) string { return "" }},
		{"short keys", 5000, func(i int) string { return strings.Repeat("k", i%40) }},
		{"long lines", 300, func(i int) string { return strings.Repeat("é", 100+i*50) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				s    proto.ColStr
				keys = proto.NewArray[string](new(proto.ColStr))
				ids  = proto.NewArray[uint64](new(proto.ColUInt64))
				n    proto.ColUInt64
				rank proto.ColInt16
			)
			for i := range tc.rows {
				s.Append(tc.str(i))
				keys.Append([]string{tc.str(i), tc.str(i + 1), "r:" + tc.str(i)})
				ids.Append(make([]uint64, i%7))
				n.Append(uint64(i))
				rank.Append(int16(i % 8))
			}
			input := proto.Input{{Name: "line", Data: &s}, {Name: "keys", Data: keys}, {Name: "ids", Data: ids},
				{Name: "n", Data: &n}, {Name: "rank", Data: &rank}}
			// As encodeBlock does: room made for a column, then the column.
			var b proto.Buffer
			for _, col := range input {
				start := len(b.Buf)
				b.Buf = grown(b.Buf, col)
				room := cap(b.Buf)
				col.EncodeStart(&b, revision)
				col.Data.EncodeColumn(&b)
				if cap(b.Buf) != room {
					t.Fatalf("%s took %d bytes, more than the %d made room for: encoding grew the buffer", col.Name, len(b.Buf)-start, room-start)
				}
			}
			if len(b.Buf) < cap(b.Buf)/4 {
				t.Fatalf("%d bytes made room for a block of %d", cap(b.Buf), len(b.Buf))
			}
			putBuf(b.Buf)
			if got := takeBuf(); len(got) != 0 {
				t.Fatalf("a pooled buffer came back holding %d bytes", len(got))
			}
		})
	}
}
