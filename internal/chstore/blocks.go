package chstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/kvtrail/kvtrail/internal/chbind"
	"github.com/kvtrail/kvtrail/internal/chblock"
)

// The analysis's large scans (every engine and gateway line of a slice,
// every decode line of a node) read their result a block at a time into
// columns (internal/chblock): at 2M requests the driver's row-by-row
// decoding took 7.0–7.6 client CPU-seconds for the engine lines alone,
// the block reader 1.0–1.1.
//
// The block reader is a second connection path beside clickhouse-go, so it
// is used only where it was tested: servers reached over the network, a
// single one or a cluster's (not the embedded engine). If it cannot speak to a server at all, before any
// block (an unknown handshake, say), the read falls back to the driver,
// row by row into the same columns, and so do the store's later reads.

// blockReader is the store's block path; nil when the store reads rows only.
type blockReader struct {
	opts chblock.Options
	// base are the settings every read sends, as the driver's connection
	// does (cluster mode: prefer_localhost_replica, in dial).
	base []chblock.Setting
	off  atomic.Bool // set after the first fallback
	// inserts counts the INSERTs opened on the block path.
	inserts atomic.Int64
}

// newBlockReader returns the block path for a store dialled with o, or nil.
// settings are the driver's connection settings; the block path sends
// those it can carry (integers) with every read.
func newBlockReader(o Options, db string, comp *clickhouse.Compression, settings clickhouse.Settings) *blockReader {
	if o.RowReads || len(o.Addrs) == 0 {
		return nil
	}
	return &blockReader{base: intSettings(nil, settings), opts: chblock.Options{
		Addrs:       o.Addrs,
		Database:    db,
		User:        o.Username,
		Passwd:      o.Password,
		DialTimeout: o.DialTimeout,
		ReadTimeout: o.ReadTimeout,
		Compress:    comp != nil && comp.Method == clickhouse.CompressionLZ4,
	}}
}

// intSettings returns base with the integer settings of add (what the
// block path can carry) set over it, sorted by name.
func intSettings(base []chblock.Setting, add clickhouse.Settings) []chblock.Setting {
	out := slices.Clone(base)
	for name, v := range add {
		n, ok := v.(int)
		if !ok || n < 0 {
			continue
		}
		out = slices.DeleteFunc(out, func(s chblock.Setting) bool { return s.Name == name })
		out = append(out, chblock.Setting{Name: name, Value: uint64(n)})
	}
	slices.SortFunc(out, func(a, b chblock.Setting) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// rowBlock is how many rows the driver path hands over at a time.
const rowBlock = 8192

// scanBlocks runs sql with args and calls onBlock after each block of rows
// has been decoded into cols; cols' columns must be those the query
// selects, in order (their names are checked on the block path). An error
// from onBlock stops the read and is returned as is.
func (s *Store) scanBlocks(ctx context.Context, sql string, args []any, cols proto.Results, onBlock func(rows int) error) error {
	ctx, done := context.WithTimeout(ctx, streamTimeout)
	defer done()
	b := s.blocks
	if b == nil || b.off.Load() {
		return s.scanRowsInto(ctx, sql, args, cols, onBlock)
	}
	s.see(sql)
	lists := listsOf(ctx)
	bound, err := chbind.Bind(time.UTC, sql, args...)
	if err != nil {
		s.answeredWith(sql, args, lists, err)
		return fmt.Errorf("bind: %w", err)
	}
	var cbErr error
	cb := func(rows int) error {
		if err := onBlock(rows); err != nil {
			cbErr = err
			return err
		}
		return nil
	}
	// The settings a caller put in ctx (WithSettings) go with the read,
	// as they do with the driver's.
	settings := b.base
	if add, _ := ctx.Value(settingsKey{}).(clickhouse.Settings); len(add) > 0 {
		settings = intSettings(b.base, add)
	}
	tables := blockTables(lists)
	err = chblock.QueryTables(ctx, b.opts, bound, settings, tables, cols, cb)
	for attempt := 1; attempt < readAttempts && blockRetryable(ctx, err, cbErr) && backoff(ctx, attempt); attempt++ {
		err = chblock.QueryTables(ctx, b.opts, bound, settings, tables, cols, cb)
	}
	var pe *chblock.ProtocolError
	if cbErr == nil && errors.As(err, &pe) && !pe.Started && ctx.Err() == nil {
		// The server could not be read this way at all. If the driver can
		// read it, it does from now on; if not, the server is down, not
		// foreign, and a later read tries blocks again.
		if rerr := s.scanRowsInto(ctx, sql, args, cols, onBlock); rerr != nil {
			return rerr
		}
		if b.off.CompareAndSwap(false, true) {
			slog.Warn("ClickHouse block reads failed; reading rows through the driver from now on", "err", err)
		}
		return nil
	}
	if cbErr != nil {
		s.answeredWith(sql, args, lists, nil)
		return cbErr
	}
	s.answeredWith(sql, args, lists, err)
	return err
}

// blockRetryable reports whether a block read that failed before handing
// over any block is worth another attempt (the connection failed, not the
// server or the caller).
func blockRetryable(ctx context.Context, err, cbErr error) bool {
	var pe *chblock.ProtocolError
	return err != nil && cbErr == nil && ctx.Err() == nil && errors.As(err, &pe) && !pe.Started
}

// scanRowsInto is scanBlocks through the driver: each row is scanned and
// appended to cols, rowBlock rows at a time.
func (s *Store) scanRowsInto(ctx context.Context, sql string, args []any, cols proto.Results, onBlock func(rows int) error) error {
	dest, appendRow, err := rowTargets(cols)
	if err != nil {
		return err
	}
	reset := func() {
		for _, c := range cols {
			c.Data.Reset()
		}
	}
	rows, err := s.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	reset()
	n := 0
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		appendRow()
		if n++; n == rowBlock {
			if err := onBlock(n); err != nil {
				return err
			}
			reset()
			n = 0
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n > 0 {
		return onBlock(n)
	}
	return nil
}

// rowTargets returns a Scan destination for each of cols and a function
// that appends the scanned row to them.
func rowTargets(cols proto.Results) ([]any, func(), error) {
	dest := make([]any, len(cols))
	apps := make([]func(), len(cols))
	for i, c := range cols {
		switch col := c.Data.(type) {
		case *proto.ColUInt64:
			dest[i], apps[i] = rowTarget(col)
		case *proto.ColUInt32:
			dest[i], apps[i] = rowTarget(col)
		case *proto.ColUInt16:
			dest[i], apps[i] = rowTarget(col)
		case *proto.ColUInt8:
			dest[i], apps[i] = rowTarget(col)
		case *proto.ColInt16:
			dest[i], apps[i] = rowTarget(col)
		case *proto.ColInt64:
			dest[i], apps[i] = rowTarget(col)
		case *proto.ColFloat64:
			dest[i], apps[i] = rowTarget(col)
		case *chblock.Str:
			dest[i], apps[i] = rowTarget[string](col)
		case *proto.ColArr[uint32]:
			dest[i], apps[i] = rowTarget[[]uint32](col)
		default:
			return nil, nil, fmt.Errorf("chstore: no row path for column %s (%T)", c.Name, c.Data)
		}
	}
	return dest, func() {
		for _, a := range apps {
			a()
		}
	}, nil
}

// rowTarget is a Scan destination of col's type and a function that
// appends what was scanned into it to col.
func rowTarget[T any, C interface{ Append(T) }](col C) (any, func()) {
	v := new(T)
	return v, func() { col.Append(*v) }
}
