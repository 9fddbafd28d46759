package chblock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/ch-go/compress"
	"github.com/ClickHouse/ch-go/proto"
)

// Column is one column of an INSERT as the server declared it in the
// header it sends before taking data: the types to encode the blocks in.
type Column struct {
	Name, Type string
}

// Insert is one INSERT being written block by block over the native
// protocol, from columns the caller fills and reuses (ch-go's proto
// columns). Ingest's rows went through clickhouse-go's column appends,
// reflective per row (and per LowCardinality value, a map of interfaces):
// a quarter of kvtrail's ingest CPU (docs/performance.md).
//
// The rows of a block are stored once the server has read it, as with any
// native INSERT: Close reports whether every block was, Abort drops the
// connection and with it what the server had not read.
type Insert struct {
	c    *client
	stop func() bool
	// Columns are the server's header, in the INSERT's column order.
	Columns []Column
	closed  bool
}

// OpenInsert sends sql, an INSERT statement the caller wrote up to its
// VALUES keyword (internal/chstore holds kvtrail's SQL), under settings and
// reads the header the server answers with. A ProtocolError from here means
// nothing was sent that the server acted on: the caller may insert another
// way.
func OpenInsert(ctx context.Context, o Options, sql string, settings []Setting) (*Insert, error) {
	c, err := dial(ctx, o)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	in := &Insert{c: c}
	// As Query: a cancelled context closes the connection, which ends a
	// pending write or read; the server then drops the INSERT.
	in.stop = context.AfterFunc(ctx, func() { _ = c.conn.Close() })
	cols, err := c.openInsert(sql, settings)
	if err != nil {
		in.finish()
		var ex *Exception
		if ctx.Err() != nil && !errors.As(err, &ex) {
			return nil, ctx.Err()
		}
		return nil, err
	}
	in.Columns = cols
	return in, nil
}

// openInsert sends the INSERT and reads packets up to its header.
func (c *client) openInsert(sql string, settings []Setting) ([]Column, error) {
	if err := c.sendQuery(sql, settings, nil); err != nil {
		return nil, err
	}
	for {
		code, err := c.packet()
		if err != nil {
			return nil, c.fail("read insert header", err)
		}
		switch code {
		case proto.ServerCodeData:
			return c.header()
		case proto.ServerCodeException:
			return nil, c.exception()
		default:
			if err := c.skipInfo(code); err != nil {
				return nil, err
			}
		}
	}
}

// header decodes the INSERT's header: a block of no rows whose columns
// carry only their names and types.
func (c *client) header() ([]Column, error) {
	var data proto.ClientData
	if err := data.DecodeAware(c.r, c.version); err != nil {
		return nil, c.fail("decode insert header", err)
	}
	if c.o.Compress {
		c.r.EnableCompression()
		defer c.r.DisableCompression()
	}
	var h headerCols
	var b proto.Block
	if err := b.DecodeBlock(c.r, c.version, &h); err != nil {
		return nil, c.fail("decode insert header", err)
	}
	return h.cols, nil
}

// headerCols is a proto.Result that keeps the names and types of a block
// without rows.
type headerCols struct{ cols []Column }

func (h *headerCols) DecodeResult(r *proto.Reader, version int, b proto.Block) error {
	if b.Rows != 0 {
		return fmt.Errorf("insert header with %d rows", b.Rows)
	}
	for i := 0; i < b.Columns; i++ {
		name, err := r.Str()
		if err != nil {
			return fmt.Errorf("column %d name: %w", i, err)
		}
		typ, err := r.Str()
		if err != nil {
			return fmt.Errorf("column %s type: %w", name, err)
		}
		if proto.FeatureCustomSerialization.In(version) {
			if _, err := r.Bool(); err != nil {
				return fmt.Errorf("column %s serialization: %w", name, err)
			}
		}
		h.cols = append(h.cols, Column{Name: name, Type: typ})
	}
	return nil
}

// maxFrame is the most uncompressed bytes in one compressed frame, as the
// server's own writer cuts them (max_compress_block_size).
const maxFrame = 1 << 20

// Write sends input, rows rows in each column, as one data block of the
// INSERT. The columns are read, not kept: the caller may reset and refill
// them as soon as it returns.
func (in *Insert) Write(rows int, input proto.Input) error {
	if in.closed {
		return errors.New("chblock: write to a finished insert")
	}
	if err := in.c.sendData(rows, input); err != nil {
		return in.abortWith(err)
	}
	return nil
}

// sendData writes one data packet holding a block of rows.
func (c *client) sendData(rows int, input proto.Input) error {
	if err := c.putData(rows, input); err != nil {
		return err
	}
	if err := c.flush(); err != nil {
		return c.fail("send block", err)
	}
	return nil
}

// putData appends to c.buf a data packet holding a block of rows: no
// columns and no rows is the empty block that ends a query's external
// tables or an INSERT's data. A block is encoded column by column, and
// once c.buf holds spillAbove bytes they are written out (earlier packets
// first, as they are in c.buf): the client holds about a block's largest
// column, not the block. At incident scale a notification list's arrays
// encode to about 100 MB, which the list's INSERT held whole (and, with
// compression, a second time compressed). A failed write mid-block leaves the
// connection unusable, and the caller closes it (Insert.abortWith); the
// server keeps no part of a block it did not receive whole.
func (c *client) putData(rows int, input proto.Input) error {
	return c.putTable("", rows, input)
}

// putTable is putData for the data packet of an external table: its
// rows under the table's name (encodeBlock checks every column has rows).
func (c *client) putTable(name string, rows int, input proto.Input) error {
	b := &c.buf
	proto.ClientCodeData.Encode(b)
	proto.ClientData{TableName: name}.EncodeAware(b, c.version)
	blk := proto.Block{Info: proto.BlockInfo{BucketNum: -1}, Columns: len(input), Rows: rows}
	spill := func() error {
		if len(b.Buf) < spillAbove {
			return nil
		}
		if err := c.flush(); err != nil {
			return c.fail("send block", err)
		}
		return nil
	}
	if !c.o.Compress {
		if err := encodeBlock(b, c.version, blk, input, spill); err != nil {
			b.Reset()
			return err
		}
		return nil
	}
	// The block is encoded apart and cut into frames of maxFrame bytes as
	// it grows (the last frame shorter): the frames are those of the
	// whole block cut at once. The writer and the block's buffer are kept
	// for the next one.
	if c.raw == nil {
		c.raw = takeBuf()
	}
	if c.zw == nil {
		c.zw = compress.NewWriter(compress.LevelZero, compress.LZ4)
	}
	raw := proto.Buffer{Buf: c.raw[:0]}
	frames := func(last bool) error {
		done := 0
		for len(raw.Buf)-done >= maxFrame || (last && done < len(raw.Buf)) {
			n := min(len(raw.Buf)-done, maxFrame)
			if err := c.zw.Compress(raw.Buf[done : done+n]); err != nil {
				return fmt.Errorf("compress block: %w", err)
			}
			b.Buf = append(b.Buf, c.zw.Data...)
			done += n
		}
		raw.Buf = raw.Buf[:copy(raw.Buf, raw.Buf[done:])]
		return spill()
	}
	err := encodeBlock(&raw, c.version, blk, input, func() error { return frames(false) })
	if err == nil {
		err = frames(true)
	}
	c.raw = raw.Buf
	if err != nil {
		b.Reset()
		return err
	}
	return nil
}

// spillAbove is how many bytes of a data packet putData holds before it
// writes them out.
const spillAbove = 1 << 20

// encodeBlock encodes blk with input's columns into buf as
// proto.Block.EncodeBlock does, calling spill after each column, and
// makes room for each column before encoding it (columnSize).
func encodeBlock(buf *proto.Buffer, version int, blk proto.Block, input proto.Input, spill func() error) error {
	if proto.FeatureBlockInfo.In(version) {
		blk.Info.Encode(buf)
	}
	buf.PutInt(blk.Columns)
	buf.PutInt(blk.Rows)
	for _, col := range input {
		if r := col.Data.Rows(); r != blk.Rows {
			return fmt.Errorf("encode block: %q has %d rows, expected %d", col.Name, r, blk.Rows)
		}
		buf.Buf = grown(buf.Buf, col)
		col.EncodeStart(buf, version)
		if v, ok := col.Data.(proto.Preparable); ok {
			if err := v.Prepare(); err != nil {
				return fmt.Errorf("encode block: prepare %q: %w", col.Name, err)
			}
		}
		if col.Data.Rows() == 0 {
			continue
		}
		if v, ok := col.Data.(proto.StateEncoder); ok {
			v.EncodeState(buf)
		}
		col.Data.EncodeColumn(buf)
		if err := spill(); err != nil {
			return err
		}
	}
	return nil
}

// Close ends the INSERT and waits for the server to have stored it: nil
// means every block written is stored.
func (in *Insert) Close() error {
	if in.closed {
		return errors.New("chblock: insert already finished")
	}
	// The empty block that ends the data.
	if err := in.c.sendData(0, nil); err != nil {
		return in.abortWith(err)
	}
	for {
		code, err := in.c.packet()
		if err != nil {
			return in.abortWith(in.c.fail("read insert end", err))
		}
		switch code {
		case proto.ServerCodeEndOfStream:
			in.finish()
			return nil
		case proto.ServerCodeException:
			return in.abortWith(in.c.exception())
		default:
			if err := in.c.skipInfo(code); err != nil {
				return in.abortWith(err)
			}
		}
	}
}

// Abort drops the INSERT: the connection is closed, and the server stores
// none of what it had not read (what it had may be stored already, as with
// any INSERT cut short).
func (in *Insert) Abort() {
	if !in.closed {
		in.finish()
	}
}

func (in *Insert) finish() {
	in.closed = true
	in.stop()
	_ = in.c.conn.Close()
	in.c.release()
}

// abortWith ends the INSERT after a failure to write or read it. A write
// that failed because the server refused the data (it answers with an
// exception and closes the connection) reports that exception when it can
// still be read.
func (in *Insert) abortWith(err error) error {
	if in.closed {
		return err
	}
	var pe *ProtocolError
	if errors.As(err, &pe) {
		if sent := in.pendingException(); sent != nil {
			err = sent
		}
	}
	in.finish()
	return err
}

// pendingException reads, briefly, an exception the server may have sent
// before it stopped reading.
func (in *Insert) pendingException() error {
	_ = in.c.conn.SetReadDeadline(time.Now().Add(time.Second))
	n, err := in.c.r.UVarInt()
	if err != nil || proto.ServerCode(n) != proto.ServerCodeException {
		return nil
	}
	return in.c.exception()
}
