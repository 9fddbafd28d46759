// Package chblock reads the result of one SELECT a block at a time over
// ClickHouse's native protocol, into columns the caller owns and reuses.
//
// The analysis reads tens of millions of rows. Through clickhouse-go every
// value is decoded into a fresh column and then copied out row by row with
// a new string for each: reading the 7.7M engine lines of a 2M-request
// window took 7.0–7.6 client CPU-seconds that way, 1.0–1.1 this way
// (docs/clickhouse.md, "Block reads"). Here the caller hands proto columns
// (github.com/ClickHouse/ch-go/proto) that are decoded in place block after
// block, and reads them by index.
//
// ch-go's own client cannot be used: for a server older than protocol
// revision 54420 (ClickHouse 18.16 is 54412) it leaves the client info out
// of the query packet, which the server reads anyway, and every query fails
// with "Unknown setting". This client speaks exactly one revision, 54412,
// whichever server it meets: the server answers at the lower of the two
// revisions (every server since 2018 keeps the older forms), so the bytes on
// the wire are those the tests exchange with 18.16.
package chblock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/ClickHouse/ch-go/compress"
	"github.com/ClickHouse/ch-go/proto"
)

// revision is the protocol revision this client speaks (ClickHouse 18.16's).
const revision = 54412

// Options says where the server is.
type Options struct {
	// Addrs are tried in order until one accepts the connection.
	Addrs                  []string
	Database, User, Passwd string
	DialTimeout            time.Duration
	// ReadTimeout bounds the wait for each packet (not the whole query: a
	// caller may spend minutes between blocks).
	ReadTimeout time.Duration
	// Compress asks for LZ4-compressed blocks.
	Compress bool
}

// Exception is an error the server returned (a bad query, a missing table,
// a wrong password): retrying will not help.
type Exception struct {
	Code    int
	Name    string
	Message string
}

func (e *Exception) Error() string {
	return fmt.Sprintf("clickhouse exception [%d]: %s", e.Code, e.Message)
}

// ProtocolError is a failure to speak to the server at all: no connection,
// or a handshake or packet this client does not understand. Before any
// block was read a caller may fall back to another client.
type ProtocolError struct {
	Op  string
	Err error
	// Started reports whether any block had been handed to the caller.
	Started bool
}

func (e *ProtocolError) Error() string {
	return "clickhouse native read: " + e.Op + ": " + e.Err.Error()
}
func (e *ProtocolError) Unwrap() error { return e.Err }

// Setting is a query-level setting with an integer value (the only kind
// revision 54412 carries without knowing the setting's type).
type Setting struct {
	Name  string
	Value uint64
}

// Query runs sql (with its arguments already bound) under settings and
// decodes each data block of the result into res, whose columns must match
// the result's names and types in order, then calls onBlock with the
// block's row count. An error from onBlock stops the read and is returned
// as is.
func Query(ctx context.Context, o Options, sql string, settings []Setting, res proto.Results, onBlock func(rows int) error) error {
	return QueryTables(ctx, o, sql, settings, nil, res, onBlock)
}

// Table is a table sent with a query as external data (a temporary table
// the statement names, e.g. "x IN kvt_rooms"): a list the server reads as
// a block instead of parsing it as a literal. Every column of Columns has
// the same number of rows.
type Table struct {
	Name    string
	Columns proto.Input
}

// QueryTables is Query with tables sent as the query's external data.
func QueryTables(ctx context.Context, o Options, sql string, settings []Setting, tables []Table, res proto.Results,
	onBlock func(rows int) error) error {
	c, err := dial(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		_ = c.conn.Close()
		c.release()
	}()
	// A cancelled context unblocks a pending read or write by closing the
	// connection (a deadline would be moved again by the next packet's
	// read timeout); the error is then the context's.
	stop := context.AfterFunc(ctx, func() { _ = c.conn.Close() })
	defer stop()
	err = c.query(sql, settings, tables, res, onBlock)
	if ctx.Err() != nil && err != nil {
		var ex *Exception
		if !errors.As(err, &ex) {
			return ctx.Err()
		}
	}
	return err
}

type client struct {
	conn    net.Conn
	o       Options
	r       *proto.Reader
	buf     proto.Buffer
	version int
	started bool
	// zw and raw compress the blocks of an INSERT (insert.go).
	zw  *compress.Writer
	raw []byte
}

func dial(ctx context.Context, o Options) (*client, error) {
	if len(o.Addrs) == 0 {
		return nil, &ProtocolError{Op: "dial", Err: errors.New("no address")}
	}
	d := net.Dialer{Timeout: o.DialTimeout}
	var errs []string
	for _, a := range o.Addrs {
		conn, err := d.DialContext(ctx, "tcp", a)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		c := &client{conn: conn, o: o, r: proto.NewReader(conn), version: revision, buf: proto.Buffer{Buf: takeBuf()}}
		if err := c.handshake(ctx); err != nil {
			conn.Close()
			c.release()
			return nil, err
		}
		return c, nil
	}
	return nil, &ProtocolError{Op: "dial", Err: errors.New(strings.Join(errs, "; "))}
}

func (c *client) fail(op string, err error) error {
	var ex *Exception
	if errors.As(err, &ex) {
		return err
	}
	return &ProtocolError{Op: op, Err: err, Started: c.started}
}

func (c *client) flush() error {
	if c.o.ReadTimeout > 0 {
		_ = c.conn.SetWriteDeadline(time.Now().Add(c.o.ReadTimeout))
	}
	_, err := c.conn.Write(c.buf.Buf)
	c.buf.Reset()
	return err
}

// packet reads the next packet's code, waiting at most ReadTimeout.
func (c *client) packet() (proto.ServerCode, error) {
	if c.o.ReadTimeout > 0 {
		_ = c.conn.SetReadDeadline(time.Now().Add(c.o.ReadTimeout))
	}
	n, err := c.r.UVarInt()
	if err != nil {
		return 0, err
	}
	return proto.ServerCode(n), nil
}

func (c *client) exception() error {
	var ex proto.Exception
	if err := ex.DecodeAware(c.r, c.version); err != nil {
		return c.fail("decode exception", err)
	}
	return &Exception{Code: int(ex.Code), Name: ex.Name, Message: ex.Message}
}

func (c *client) handshake(ctx context.Context) error {
	if c.o.DialTimeout > 0 {
		_ = c.conn.SetDeadline(time.Now().Add(c.o.DialTimeout))
	}
	proto.ClientHello{
		Name:            "kvtrail",
		Major:           1,
		ProtocolVersion: revision,
		Database:        c.o.Database,
		User:            user(c.o.User),
		Password:        c.o.Passwd,
	}.Encode(&c.buf)
	if err := c.flush(); err != nil {
		return c.fail("send hello", err)
	}
	code, err := c.packet()
	if err != nil {
		return c.fail("read hello", err)
	}
	switch code {
	case proto.ServerCodeHello:
	case proto.ServerCodeException:
		return c.exception()
	default:
		return c.fail("read hello", fmt.Errorf("packet %d instead of the server's hello", code))
	}
	var hello proto.ServerHello
	if err := hello.DecodeAware(c.r, revision); err != nil {
		return c.fail("decode hello", err)
	}
	if hello.Revision < c.version {
		// Older than 18.16: speak its revision (the decoders below are
		// aware of every revision).
		c.version = hello.Revision
	}
	_ = c.conn.SetDeadline(time.Time{})
	return ctx.Err()
}

// user is the user name sent: the server's default user when none is set,
// as clickhouse-go does.
func user(u string) string {
	if u == "" {
		return "default"
	}
	return u
}

func (c *client) compression() proto.Compression {
	if c.o.Compress {
		return proto.CompressionEnabled
	}
	return proto.CompressionDisabled
}

// sendQuery writes the query packet, each external table as a data packet
// of its name, and the empty data block that ends them. ch-go's
// proto.Query leaves the client info out below revision 54420, so the
// packet is laid out here, field by field as ClickHouse's
// TCPHandler::receiveQuery reads it.
func (c *client) sendQuery(sql string, settings []Setting, tables []Table) error {
	b := &c.buf
	proto.ClientCodeQuery.Encode(b)
	b.PutString("") // query id: the server assigns one
	proto.ClientInfo{
		Query:           proto.ClientQueryInitial,
		InitialAddress:  c.conn.LocalAddr().String(),
		Interface:       proto.InterfaceTCP,
		ClientName:      "kvtrail",
		Major:           1,
		ProtocolVersion: revision,
	}.EncodeAware(b, c.version)
	// Below revision 54429 a setting is its name and its value in the
	// setting's own binary form: a variable-length integer for the integer
	// and boolean settings.
	for _, st := range settings {
		b.PutString(st.Name)
		b.PutUVarInt(st.Value)
	}
	b.PutString("") // end of settings
	proto.StageComplete.Encode(b)
	c.compression().Encode(b)
	b.PutString(sql)
	for _, t := range tables {
		rows := 0
		if len(t.Columns) > 0 {
			rows = t.Columns[0].Data.Rows()
		}
		if err := c.putTable(t.Name, rows, t.Columns); err != nil {
			return c.fail("send table "+t.Name, err)
		}
	}
	// The empty block that ends the external tables.
	if err := c.putData(0, nil); err != nil {
		return c.fail("send query", err)
	}
	if err := c.flush(); err != nil {
		return c.fail("send query", err)
	}
	return nil
}

func (c *client) query(sql string, settings []Setting, tables []Table, res proto.Results, onBlock func(rows int) error) error {
	if err := c.sendQuery(sql, settings, tables); err != nil {
		return err
	}
	for {
		code, err := c.packet()
		if err != nil {
			return c.fail("read packet", err)
		}
		switch code {
		case proto.ServerCodeData, proto.ServerCodeTotals, proto.ServerCodeExtremes:
			var target proto.Result = res
			if code != proto.ServerCodeData {
				target = nil // decoded to skip it
			}
			rows, err := c.block(target)
			if err != nil {
				return err
			}
			if code != proto.ServerCodeData || rows == 0 {
				continue
			}
			c.started = true
			if err := onBlock(rows); err != nil {
				return err
			}
		case proto.ServerCodeException:
			return c.exception()
		case proto.ServerCodeEndOfStream:
			return nil
		default:
			if err := c.skipInfo(code); err != nil {
				return err
			}
		}
	}
}

// skipInfo reads past a packet that carries no rows (progress, profile,
// server logs, the table's column defaults); any other packet is one this
// client does not know.
func (c *client) skipInfo(code proto.ServerCode) error {
	switch code {
	case proto.ServerCodeProgress:
		var p proto.Progress
		if err := p.DecodeAware(c.r, c.version); err != nil {
			return c.fail("decode progress", err)
		}
	case proto.ServerCodeProfile:
		var p proto.Profile
		if err := p.DecodeAware(c.r, c.version); err != nil {
			return c.fail("decode profile", err)
		}
	case proto.ServerCodeLog:
		// Server logs come as an uncompressed block.
		if _, err := c.rawBlock(nil, false); err != nil {
			return err
		}
	case proto.ServerCodeTableColumns:
		// The columns' defaults (revision 54410 and later), sent before
		// an INSERT's header: the server fills what it leaves out.
		var tc proto.TableColumns
		if err := tc.DecodeAware(c.r, c.version); err != nil {
			return c.fail("decode table columns", err)
		}
	default:
		return c.fail("read packet", fmt.Errorf("unexpected packet %d", code))
	}
	return nil
}

// block decodes a data block (compressed when asked) into target; a nil
// target skips a block that has no rows to keep.
func (c *client) block(target proto.Result) (int, error) {
	return c.rawBlock(target, c.o.Compress)
}

func (c *client) rawBlock(target proto.Result, compressed bool) (int, error) {
	var data proto.ClientData
	if err := data.DecodeAware(c.r, c.version); err != nil {
		return 0, c.fail("decode block", err)
	}
	if compressed {
		c.r.EnableCompression()
		defer c.r.DisableCompression()
	}
	var b proto.Block
	if target == nil {
		target = skip{}
	}
	if err := b.DecodeBlock(c.r, c.version, target); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
			return 0, c.fail("read block", err)
		}
		var ne net.Error
		if errors.As(err, &ne) {
			return 0, c.fail("read block", err)
		}
		// A column that does not match: the caller's columns and the
		// query disagree. Not a reason to fall back.
		return 0, fmt.Errorf("decode block: %w", err)
	}
	return b.Rows, nil
}

// skip decodes a block nobody reads (totals, extremes, server logs).
type skip struct{}

func (skip) DecodeResult(r *proto.Reader, version int, b proto.Block) error {
	var cols proto.Results
	for i := 0; i < b.Columns; i++ {
		cols = append(cols, proto.ResultColumn{Data: &proto.ColAuto{}})
	}
	return cols.DecodeResult(r, version, b)
}
