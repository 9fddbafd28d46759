package chblock

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/ClickHouse/ch-go/compress"
	"github.com/ClickHouse/ch-go/proto"
)

// recordConn keeps what is written to it.
type recordConn struct {
	net.Conn
	writes [][]byte
}

func (w *recordConn) Write(p []byte) (int, error) {
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

// TestPutDataStreamsTheBlock: a block many times spillAbove is written out
// as it is encoded, in several writes, and the client's buffers stay well
// below the block; the bytes are those of the block encoded whole, with
// compression the same frames.
func TestPutDataStreamsTheBlock(t *testing.T) {
	const rows = 30_000
	var (
		strs  [8]proto.ColStr // a block of many columns, none of them most of it
		keys  = proto.NewArray[string](new(proto.ColStr))
		ids   = proto.NewArray[uint64](new(proto.ColUInt64))
		n     proto.ColUInt64
		input proto.Input
	)
	rng := rand.New(rand.NewPCG(1, 2)) // values LZ4 cannot shrink much
	for i := range rows {
		for j := range strs {
			strs[j].Append(fmt.Sprintf("request-%016x%016x", rng.Uint64(), rng.Uint64()))
		}
		keys.Append([]string{fmt.Sprintf("r:%016x%016x", rng.Uint64(), rng.Uint64()), fmt.Sprintf("f:%016x", rng.Uint64())})
		ids.Append([]uint64{uint64(i), uint64(i) << 20, uint64(i) * 3})
		n.Append(uint64(i))
	}
	for j := range strs {
		input = append(input, proto.InputColumn{Name: fmt.Sprintf("s%d", j), Data: &strs[j]})
	}
	input = append(input, proto.InputColumn{Name: "keys", Data: keys}, proto.InputColumn{Name: "ids", Data: ids},
		proto.InputColumn{Name: "n", Data: &n})
	blk := proto.Block{Info: proto.BlockInfo{BucketNum: -1}, Columns: len(input), Rows: rows}
	for _, compressed := range []bool{false, true} {
		t.Run(fmt.Sprintf("compress=%v", compressed), func(t *testing.T) {
			want := proto.Buffer{}
			proto.ClientCodeData.Encode(&want)
			proto.ClientData{}.EncodeAware(&want, revision)
			raw := proto.Buffer{}
			if err := blk.EncodeBlock(&raw, revision, input); err != nil {
				t.Fatal(err)
			}
			block := len(raw.Buf)
			if block < 4*spillAbove {
				t.Fatalf("a block of %d bytes: too small to show streaming", block)
			}
			if !compressed {
				want.Buf = append(want.Buf, raw.Buf...)
			} else {
				zw := compress.NewWriter(compress.LevelZero, compress.LZ4)
				for r := raw.Buf; len(r) > 0; r = r[min(len(r), maxFrame):] {
					if err := zw.Compress(r[:min(len(r), maxFrame)]); err != nil {
						t.Fatal(err)
					}
					want.Buf = append(want.Buf, zw.Data...)
				}
			}

			w := &recordConn{}
			c := &client{conn: w, o: Options{Compress: compressed}, version: revision}
			if err := c.putData(rows, input); err != nil {
				t.Fatal(err)
			}
			held := cap(c.buf.Buf) + cap(c.raw)
			if err := c.flush(); err != nil {
				t.Fatal(err)
			}
			if got := bytes.Join(w.writes, nil); !bytes.Equal(got, want.Buf) {
				t.Fatalf("wrote %d bytes in %d writes, not the %d of the block encoded whole", len(got), len(w.writes), len(want.Buf))
			}
			if len(w.writes) < 3 {
				t.Errorf("the block went out in %d writes: it was held whole", len(w.writes))
			}
			if held >= block/2 {
				t.Errorf("the client held %d bytes of buffers for a block of %d", held, block)
			}
		})
	}
}

// A column with the wrong number of rows is an error, as EncodeBlock's.
func TestPutDataRowMismatch(t *testing.T) {
	var a, b proto.ColUInt64
	a.Append(1)
	w := &recordConn{}
	c := &client{conn: w, version: revision}
	err := c.putData(1, proto.Input{{Name: "a", Data: &a}, {Name: "b", Data: &b}})
	if err == nil || len(c.buf.Buf) != 0 {
		t.Fatalf("err %v, %d bytes left to send; want an error and nothing to send", err, len(c.buf.Buf))
	}
}
