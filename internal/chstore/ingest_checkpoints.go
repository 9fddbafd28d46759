package chstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
)

// The statements behind ingest's checkpoints (ingest.CheckpointStore):
// what a rerun resumes from, the nodes' endpoints and the correlation step.

// LatestSourceCheckpoint is a source's latest ingest_sources row.
func (s IngestStatements) LatestSourceCheckpoint(ctx context.Context, sourceID string) (ingest.Checkpoint, bool, error) {
	cp := ingest.Checkpoint{SourceID: sourceID}
	var complete uint8
	q := `SELECT log_format, lines, parsed, unknown, malformed, bytes, committed_offset, complete, first_ts, last_ts, version
FROM ingest_sources WHERE source_id = ? ORDER BY version DESC LIMIT 1`
	err := s.c.QueryRow(ctx, q, sourceID).Scan(&cp.Format, &cp.Records, &cp.Parsed, &cp.Unknown, &cp.Malformed,
		&cp.Bytes, &cp.Offset, &complete, &cp.FirstTS, &cp.LastTS, &cp.Version)
	if err != nil {
		if ingIsNoRows(err) {
			return ingest.Checkpoint{SourceID: sourceID}, false, nil
		}
		return cp, false, err
	}
	cp.Complete = complete == 1
	return cp, true, nil
}

// FileCheckpointCandidates returns the latest checkpoint of every file
// source on node whose head is headLen bytes with digest headDigest, or is
// shorter than headLen (a file first read while it was short; the caller
// checks that the content starts with it).
func (s IngestStatements) FileCheckpointCandidates(ctx context.Context, node string, headLen uint32, headDigest string) ([]ingest.Checkpoint, error) {
	return s.fileCheckpoints(ctx, node, ` WHERE (head_len = ? AND head_digest = ?) OR head_len < ?`, headLen, headDigest, headLen)
}

// FileCheckpointsOnNode returns the latest checkpoint of every file source
// on node: what an ingest run reads once per node, and then filters as
// FileCheckpointCandidates does for each of the node's files.
func (s IngestStatements) FileCheckpointsOnNode(ctx context.Context, node string) ([]ingest.Checkpoint, error) {
	return s.fileCheckpoints(ctx, node, "")
}

// fileCheckpoints reads the latest file_checkpoints row of every source
// on node, filtered by where (over the latest rows' columns; "" for all).
func (s IngestStatements) fileCheckpoints(ctx context.Context, node, where string, args ...any) ([]ingest.Checkpoint, error) {
	q := `SELECT groupArray(source_id), groupArray(path), groupArray(stream_id), groupArray(head_len), groupArray(head_digest),
 groupArray(prefix_len), groupArray(prefix_digest), groupArray(log_format), groupArray(lines), groupArray(parsed),
 groupArray(unknown), groupArray(malformed), groupArray(committed_offset), groupArray(complete), groupArray(state),
 groupArray(first_ts), groupArray(last_ts), groupArray(size), groupArray(resume_offset), groupArray(tail_status), groupArray(v)
FROM (
 SELECT source_id, argMax(path, version) AS path, argMax(stream_id, version) AS stream_id, argMax(head_len, version) AS head_len,
  argMax(head_digest, version) AS head_digest, argMax(prefix_len, version) AS prefix_len, argMax(prefix_digest, version) AS prefix_digest,
  argMax(log_format, version) AS log_format, argMax(lines, version) AS lines, argMax(parsed, version) AS parsed,
  argMax(unknown, version) AS unknown, argMax(malformed, version) AS malformed, argMax(committed_offset, version) AS committed_offset,
  argMax(complete, version) AS complete, argMax(state, version) AS state, argMax(first_ts, version) AS first_ts,
  argMax(last_ts, version) AS last_ts, argMax(size, version) AS size,
  argMax(resume_offset, version) AS resume_offset, argMax(tail_status, version) AS tail_status, max(version) AS v
 FROM file_checkpoints WHERE node = ? GROUP BY source_id
)` + where
	var (
		ids, paths, streams, hdigests, pdigests, formats, states []string
		hlens                                                    []uint32
		plens, lines, parsed, unknown, malformed, offsets, vers  []uint64
		sizes, resumes                                           []uint64
		tails                                                    []string
		complete                                                 []uint8
		first, last                                              []time.Time
	)
	err := s.c.QueryRow(ctx, q, append([]any{node}, args...)...).Scan(&ids, &paths, &streams, &hlens, &hdigests,
		&plens, &pdigests, &formats, &lines, &parsed, &unknown, &malformed, &offsets, &complete, &states, &first, &last, &sizes, &resumes, &tails, &vers)
	if err != nil {
		return nil, err
	}
	out := make([]ingest.Checkpoint, 0, len(ids))
	for i := range ids {
		out = append(out, ingest.Checkpoint{SourceID: ids[i], Path: paths[i], Node: node, Format: formats[i],
			// bytes counts what was committed: the committed offset.
			Counts:  ingest.Counts{Records: lines[i], Parsed: parsed[i], Unknown: unknown[i], Malformed: malformed[i], Bytes: offsets[i]},
			FirstTS: first[i], LastTS: last[i], Offset: offsets[i], Size: sizes[i], Complete: complete[i] == 1, Version: vers[i],
			File: &ingest.FileState{StreamID: streams[i], HeadLen: hlens[i], HeadDigest: hdigests[i], PrefixLen: plens[i],
				PrefixDigest: pdigests[i], ResumeOffset: resumes[i], TailStatus: tails[i], State: states[i]}})
	}
	return out, nil
}

// LegacySourceCheckpoints are node and path's sources from before
// file_checkpoints (migration 0004): in ingest_sources, not in
// file_checkpoints.
func (s IngestStatements) LegacySourceCheckpoints(ctx context.Context, node, path string) ([]ingest.LegacySource, error) {
	var ids []string
	var sizes, offsets, vers []uint64
	q := `SELECT groupArray(source_id), groupArray(size), groupArray(committed_offset), groupArray(v) FROM (
 SELECT source_id, argMax(size, version) AS size, argMax(committed_offset, version) AS committed_offset, max(version) AS v
 FROM ingest_sources WHERE node = ? AND path = ?
  AND source_id GLOBAL NOT IN (SELECT source_id FROM file_checkpoints WHERE node = ?) GROUP BY source_id)`
	if err := s.c.QueryRow(ctx, q, node, path, node).Scan(&ids, &sizes, &offsets, &vers); err != nil {
		return nil, err
	}
	out := make([]ingest.LegacySource, len(ids))
	for i := range ids {
		out[i] = ingest.LegacySource{SourceID: ids[i], Size: sizes[i], Offset: offsets[i], Version: vers[i]}
	}
	return out, nil
}

// LegacySourcePaths is the node and path of every source that
// LegacySourceCheckpoints could return anything for: an ingest_sources row
// whose (node, source_id) has no file_checkpoints row. Ingest reads it once
// per run instead of asking per file.
func (s IngestStatements) LegacySourcePaths(ctx context.Context) ([]ingest.NodePath, error) {
	var nodes, paths []string
	q := `SELECT groupArray(node), groupArray(path) FROM (
 SELECT DISTINCT node, path FROM ingest_sources
 WHERE (node, source_id) GLOBAL NOT IN (SELECT node, source_id FROM file_checkpoints))`
	if err := s.c.QueryRow(ctx, q).Scan(&nodes, &paths); err != nil {
		return nil, fmt.Errorf("legacy source paths: %w", err)
	}
	out := make([]ingest.NodePath, len(nodes))
	for i := range nodes {
		out[i] = ingest.NodePath{Node: nodes[i], Path: paths[i]}
	}
	return out, nil
}

// SaveSourceCheckpoints writes every checkpoint's ingest_sources row (the
// completeness report) in one insert.
func (s IngestStatements) SaveSourceCheckpoints(ctx context.Context, cps []ingest.Checkpoint, now time.Time, version uint64) error {
	x, err := s.c.PrepareBatch(ctx, `INSERT INTO ingest_sources (source_id, path, node, role, log_format, first_ts, last_ts,
 lines, parsed, unknown, malformed, bytes, committed_offset, size, complete, updated_at, version)`)
	if err != nil {
		return err
	}
	for _, cp := range cps {
		if err := x.Append(cp.SourceID, cp.Path, cp.Node, cp.Role, cp.Format, ingDateTime(cp.FirstTS), ingDateTime(cp.LastTS),
			cp.Records, cp.Parsed, cp.Unknown, cp.Malformed, cp.Bytes, cp.Offset, cp.Size, ingBool(cp.Stored()), now, version); err != nil {
			_ = x.Abort()
			return fmt.Errorf("source %s: %w", cp.SourceID, err)
		}
	}
	return x.Send()
}

// SaveFileCheckpoints writes the file_checkpoints row (what a rerun
// resumes from) of every checkpoint of a file, in one insert.
func (s IngestStatements) SaveFileCheckpoints(ctx context.Context, cps []ingest.Checkpoint, now time.Time, version uint64) error {
	n := 0
	for _, cp := range cps {
		if cp.File != nil {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	x, err := s.c.PrepareBatch(ctx, `INSERT INTO file_checkpoints (source_id, node, path, stream_id, head_len, head_digest,
 prefix_len, prefix_digest, log_format, first_ts, last_ts, lines, parsed, unknown, malformed, committed_offset, resume_offset,
 tail_status, size, complete, state, damage_offset, updated_at, version)`)
	if err != nil {
		return err
	}
	for _, cp := range cps {
		f := cp.File
		if f == nil {
			continue
		}
		if err := x.Append(cp.SourceID, cp.Node, cp.Path, f.StreamID, f.HeadLen, f.HeadDigest, f.PrefixLen, f.PrefixDigest,
			cp.Format, ingDateTime(cp.FirstTS), ingDateTime(cp.LastTS), cp.Records, cp.Parsed, cp.Unknown, cp.Malformed,
			cp.Offset, f.ResumeOffset, f.TailStatus, cp.Size, ingBool(cp.Stored()), f.State, f.DamageOffset, now, version); err != nil {
			_ = x.Abort()
			return fmt.Errorf("source %s: %w", cp.SourceID, err)
		}
	}
	return x.Send()
}

// SaveNodeEndpoints writes one nodes row per node (version now).
func (s IngestStatements) SaveNodeEndpoints(ctx context.Context, nodes []ingest.NodeEndpoints, now time.Time) error {
	if len(nodes) == 0 {
		return nil
	}
	x, err := s.c.PrepareBatch(ctx, "INSERT INTO nodes (node, role, endpoints, updated_at, version)")
	if err != nil {
		return err
	}
	for _, n := range nodes {
		eps := n.Endpoints
		if eps == nil {
			eps = []string{}
		}
		if err := x.Append(n.Node, n.Role, eps, now, uint64(now.UnixNano())); err != nil {
			_ = x.Abort()
			return fmt.Errorf("node %s: %w", n.Node, err)
		}
	}
	return x.Send()
}

// StepWatermark is the newest watermark ingest_steps holds for step.
func (s IngestStatements) StepWatermark(ctx context.Context, step string) (uint64, error) {
	var watermark uint64
	err := s.c.QueryRow(ctx, "SELECT max(watermark) FROM ingest_steps WHERE step = ?", step).Scan(&watermark)
	return watermark, err
}

// FileSpanSince is the time span of the file sources whose latest
// checkpoint is newer than watermark and that hold timed lines, with the
// newest such version as the span's watermark.
func (s IngestStatements) FileSpanSince(ctx context.Context, watermark uint64) (ingest.CorrelationSpan, uint64, error) {
	var sp ingest.CorrelationSpan
	var n uint64
	q := `SELECT count(), min(first_ts), max(last_ts), max(v) FROM (
 SELECT argMax(first_ts, version) AS first_ts, argMax(last_ts, version) AS last_ts, max(version) AS v
 FROM file_checkpoints GROUP BY node, source_id)
WHERE v > ? AND first_ts > toDateTime(0)`
	err := s.c.QueryRow(ctx, q, watermark).Scan(&n, &sp.From, &sp.To, &sp.Watermark)
	return sp, n, err
}

// RecordStep records in ingest_steps that step covered sp. One row, so
// INSERT ... SELECT: 18.16 hangs on INSERT ... VALUES over the native
// protocol.
func (s IngestStatements) RecordStep(ctx context.Context, step string, sp ingest.CorrelationSpan, requests uint64, now time.Time) error {
	return s.c.Exec(ctx, `INSERT INTO ingest_steps (step, watermark, span_from, span_to, requests, updated_at, version)
 SELECT ?, ?, ?, ?, ?, ?, ?`, step, sp.Watermark, ingDateTime(sp.From), ingDateTime(sp.To), requests, now, uint64(now.UnixNano()))
}

// StoredLineIDs returns the raw_lines ids stored in spans, with one query
// for all of them.
func (s IngestStatements) StoredLineIDs(ctx context.Context, spans []ingest.LineSpan) ([]uint64, error) {
	if len(spans) == 0 {
		return nil, nil
	}
	conds := make([]string, 0, len(spans))
	args := make([]any, 0, 4*len(spans))
	for _, sp := range spans {
		// A line stored before migration 0013 has its file_digest, one
		// stored since its source_ref (file_digest empty).
		conds = append(conds, "(node = ? AND (file_digest = ? OR source_ref = ?) AND ts >= ? AND ts <= ?)")
		args = append(args, sp.Node, sp.FileDigest, sp.SourceRef, ingDateTime(sp.From), ingDateTime(sp.To))
	}
	var ids []uint64
	q := "SELECT groupUniqArray(line_id) FROM raw_lines WHERE " + strings.Join(conds, " OR ")
	if err := s.c.QueryRow(ctx, q, args...).Scan(&ids); err != nil {
		return nil, err
	}
	return ids, nil
}

// ingMaxDateTime is the end of DateTime's range.
var ingMaxDateTime = time.Date(2105, 12, 31, 0, 0, 0, 0, time.UTC)

// ingDateTime clamps t into DateTime's range (1970..2105): the zero time
// of a source with no timed line yet is stored as the epoch.
func ingDateTime(t time.Time) time.Time {
	if t.Before(time.Unix(0, 0)) {
		return time.Unix(0, 0).UTC()
	}
	if t.After(ingMaxDateTime) {
		return ingMaxDateTime
	}
	return t.UTC()
}

func ingBool(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func ingIsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
