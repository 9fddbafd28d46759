package chstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/kvtrail/kvtrail/posture"
)

// The reads behind posture.Load (posture.DB): boots, the lines near them
// and the decode metadata read check.

// PostureConn is the part of a connection posture's reads run on: *Store,
// or another engine speaking the driver's types (internal/chdbstore).
type PostureConn interface {
	Query(ctx context.Context, sql string, args ...any) (driver.Rows, error)
}

// PostureStatements runs posture's reads (posture.DB) on a connection.
// *Store has the same methods, run on itself.
type PostureStatements struct{ c PostureConn }

var (
	_ posture.DB = PostureStatements{}
	_ posture.DB = (*Store)(nil)
)

func (s *Store) posture() PostureStatements { return PostureStatements{c: s} }

// PostureBoots: see PostureStatements.PostureBoots.
func (s *Store) PostureBoots(ctx context.Context) ([]posture.BootRow, error) {
	return s.posture().PostureBoots(ctx)
}

// LinePlaces: see PostureStatements.LinePlaces.
func (s *Store) LinePlaces(ctx context.Context, node string, ids []uint64) ([]posture.BootLine, error) {
	return s.posture().LinePlaces(ctx, node, ids)
}

// VersionLines: see PostureStatements.VersionLines.
func (s *Store) VersionLines(ctx context.Context, node string, from, to time.Time) ([]posture.BootLine, error) {
	return s.posture().VersionLines(ctx, node, from, to)
}

// ReadCheckFirings: see PostureStatements.ReadCheckFirings.
func (s *Store) ReadCheckFirings(ctx context.Context) ([]posture.Firing, error) {
	return s.posture().ReadCheckFirings(ctx)
}

// ReleaseTimeouts: see PostureStatements.ReleaseTimeouts.
func (s *Store) ReleaseTimeouts(ctx context.Context) ([]posture.Firing, error) {
	return s.posture().ReleaseTimeouts(ctx)
}

const postureBootsSQL = `SELECT node, role, boot_ts_ns, boot_id, disaggregation_mode, transfer_backend, page_size,
 context_len, max_total_num_tokens, max_req_input_len, arg_keys, arg_values, line_ids
FROM node_boots FINAL
ORDER BY node, boot_ts_ns`

// PostureBoots are every engine boot, by node then boot time.
func (s PostureStatements) PostureBoots(ctx context.Context) ([]posture.BootRow, error) {
	rows, err := s.c.Query(ctx, postureBootsSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []posture.BootRow
	for rows.Next() {
		var r posture.BootRow
		if err := rows.Scan(&r.Node, &r.Role, &r.BootNS, &r.BootID, &r.Mode, &r.Backend, &r.PageSize, &r.ContextLen,
			&r.Pool, &r.MaxReqInputLen, &r.ArgKeys, &r.ArgValues, &r.LineIDs); err != nil {
			return nil, fmt.Errorf("scan node boot: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Where each boot's startup lines are, to place the lines below. A line
// written since migration 0013 names its file by source_ref.
const postureLinePlacesSQL = `SELECT line_id, file_digest, source_ref, byte_offset FROM raw_lines
WHERE node = ? AND has(?, line_id)`

// LinePlaces returns the file and offset of node's lines ids.
func (s PostureStatements) LinePlaces(ctx context.Context, node string, ids []uint64) ([]posture.BootLine, error) {
	rows, err := s.c.Query(ctx, postureLinePlacesSQL, node, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []posture.BootLine
	var refs []uint64
	for rows.Next() {
		var l posture.BootLine
		var ref uint64
		if err := rows.Scan(&l.LineID, &l.File, &ref, &l.Offset); err != nil {
			return nil, fmt.Errorf("scan boot line: %w", err)
		}
		out = append(out, l)
		refs = append(refs, ref)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	names, err := readLineSources(ctx, s.c, refs)
	if err != nil {
		return nil, err
	}
	for i, ref := range refs {
		if ref != 0 {
			out[i].File = names[ref].FileDigest
		}
	}
	return out, nil
}

// Lines of a node that may carry a version or an environment dump
// (prefiltered here, matched exactly by posture). Such lines usually have
// no timestamp of their own: ingest gives them the time of the record
// before them, or 0 at the top of a file, hence the ts = 0 branch.
// The file is the line's file_digest, or its source's (migration 0013):
// FILE is replaced by that expression (lineSourceExpr), so the order and
// the limit are the same for both kinds of rows. "sglang:" must be
// followed by white space, as posture's matcher requires (RE2's \s is
// Go's) and as check_env prints it ("sglang: 0.5.11",
// python/sglang/check_env.py, sgl-project/sglang at 00b08c4): SGLang
// names every metric "sglang:…" (python/sglang/srt/metrics/collector.py),
// and those lines filled the limit before a version line further down.
//
// Only lines no parser recognised, startup lines and markers are searched
// (PREWHERE on kind, parse.KindNone, KindBoot, KindMarker): a request line
// carries the customer's prompt, which may name any version ("upgrade
// from sglang==0.4.0"), and is no statement of what the server runs; nor
// is a batch, transfer, gateway, metric or page line. Those are nearly
// every line of a node, so the search no longer lowercases them all: at
// incident-2026 scale 2 it read 822,322 lines in 11 queries for 1.14
// server CPU-seconds a run, 0.14 since (docs/performance.md).
const (
	postureVersionWhere = `PREWHERE kind IN ('', 'boot', 'marker')
WHERE node = ? AND (ts = toDateTime(0) OR (ts >= toDateTime(?) AND ts <= toDateTime(?)))
 AND (like(lower(line), '%sglang==%') OR match(lower(line), 'sglang:\\s') OR like(lower(line), '%sglang version%')
      OR like(line, '%SGLANG_%'))`
	postureVersionLinesSQL = `SELECT FILE AS file_of, byte_offset, line_id, line FROM raw_lines
` + postureVersionWhere + `
ORDER BY file_of, byte_offset
LIMIT 20000`
	// The sources of those lines, when the node has too many to name
	// them all in one statement.
	postureVersionSourcesSQL = `SELECT groupUniqArray(source_ref) FROM raw_lines
` + postureVersionWhere + ` AND source_ref != 0`
)

// VersionLines are node's lines from..to (or at time 0) that may carry an
// SGLang version or an environment dump, in file order.
func (s PostureStatements) VersionLines(ctx context.Context, node string, from, to time.Time) ([]posture.BootLine, error) {
	where := []any{node, uint32(max(from.Unix(), 1)), uint32(max(to.Unix(), 0))}
	src, err := readNodeSources(ctx, s.c, node)
	if err != nil {
		return nil, err
	}
	if len(src.split(sourceChunkBytes)) > 1 {
		if src, err = s.versionSources(ctx, where); err != nil {
			return nil, err
		}
	}
	file, fileArgs := lineSourceExpr(src, true)
	rows, err := s.c.Query(ctx, strings.Replace(postureVersionLinesSQL, "FILE", file, 1), append(fileArgs, where...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []posture.BootLine
	for rows.Next() {
		var l posture.BootLine
		if err := rows.Scan(&l.File, &l.Offset, &l.LineID, &l.Line); err != nil {
			return nil, fmt.Errorf("scan boot line: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// The decode metadata read check logs these events when it fires
// (reference §c4): their presence proves the running version has it.
const postureReadCheckSQL = `SELECT node, min(ts_ns) AS first_ns, min(line_id) AS first_line, count() AS n FROM transfer_events
WHERE event IN ('context_corruption', 'metadata_not_ready')
GROUP BY node`

// ReadCheckFirings are, per node, the first firing of the read check and
// how often it fired.
func (s PostureStatements) ReadCheckFirings(ctx context.Context) ([]posture.Firing, error) {
	return s.firings(ctx, postureReadCheckSQL, "read check")
}

// firings reads the rows of a statement of (node, first_ns, first_line, n).
func (s PostureStatements) firings(ctx context.Context, query, what string) ([]posture.Firing, error) {
	rows, err := s.c.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []posture.Firing
	for rows.Next() {
		var r posture.Firing
		if err := rows.Scan(&r.Node, &r.FirstNS, &r.FirstLine, &r.N); err != nil {
			return nil, fmt.Errorf("scan %s: %w", what, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Deferred KV releases that timed out (reference §c4), per node and hour:
// an hour a row, so a node that times out on every abort (the common path
// per sglang #38961) still returns a few rows a day.
const postureReleaseTimeoutsSQL = `SELECT node, min(ts_ns) AS first_ns, min(line_id) AS first_line, count() AS n FROM transfer_events
WHERE event = 'deferred_release_timeout'
GROUP BY node, intDiv(ts_ns, 3600000000000)`

// ReleaseTimeouts are the deferred KV releases that timed out, per node
// and hour.
func (s PostureStatements) ReleaseTimeouts(ctx context.Context) ([]posture.Firing, error) {
	return s.firings(ctx, postureReleaseTimeoutsSQL, "deferred release timeouts")
}

// versionSources are the sources of the lines VersionLines reads.
func (s PostureStatements) versionSources(ctx context.Context, where []any) (sourceArrays, error) {
	rows, err := s.c.Query(ctx, postureVersionSourcesSQL, where...)
	if err != nil {
		return sourceArrays{}, fmt.Errorf("sources of version lines: %w", err)
	}
	var refs []uint64
	for rows.Next() {
		if err := rows.Scan(&refs); err != nil {
			rows.Close()
			return sourceArrays{}, fmt.Errorf("sources of version lines: %w", err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return sourceArrays{}, fmt.Errorf("sources of version lines: %w", err)
	}
	names, err := readLineSources(ctx, s.c, refs)
	if err != nil {
		return sourceArrays{}, err
	}
	return newSourceArrays(names), nil
}
