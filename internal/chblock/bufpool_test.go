package chblock

import (
	"strings"
	"testing"

	"github.com/ClickHouse/ch-go/proto"
)

// TestGrownHoldsTheBlock: the room made before encoding holds the encoded
// block of the column kinds kvtrail's big inserts send (strings, arrays of
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
			b := proto.Buffer{Buf: grown(nil, input)}
			room := cap(b.Buf)
			blk := proto.Block{Info: proto.BlockInfo{BucketNum: -1}, Columns: len(input), Rows: tc.rows}
			if err := blk.EncodeBlock(&b, revision, input); err != nil {
				t.Fatal(err)
			}
			if cap(b.Buf) != room {
				t.Fatalf("the block took %d bytes, more than the %d made room for: encoding grew the buffer", len(b.Buf), room)
			}
			if len(b.Buf) < room/4 {
				t.Fatalf("%d bytes made room for a block of %d", room, len(b.Buf))
			}
			putBuf(b.Buf)
			if got := takeBuf(); len(got) != 0 {
				t.Fatalf("a pooled buffer came back holding %d bytes", len(got))
			}
		})
	}
}
