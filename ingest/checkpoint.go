package ingest

import (
	"context"
	"fmt"
	"time"
)

// checkpoint is a source's row in ingest_sources: how far it was committed
// and what was counted up to there (completeness accounting).
type checkpoint struct {
	SourceID string
	Path     string
	Node     string
	Role     string
	Format   string
	Counts
	FirstTS time.Time
	LastTS  time.Time
	Offset  uint64
	Size    uint64
	// Complete marks a source's final checkpoint. A file that could not be
	// read to its end (File.State "partial") is stored as not complete, so
	// every rerun reports it again.
	Complete bool
	// File is set for file sources: the identity and prefix digest a
	// rerun verifies before it continues (file_checkpoints). Push streams
	// leave it nil.
	File *fileState
	// Version is when it was saved (UnixNano, the row's version): a forced
	// run that is retrying keeps the checkpoints it saved itself.
	Version uint64
}

// stored is the complete flag as saved: a partial file is not complete.
func (cp checkpoint) stored() bool {
	return cp.Complete && (cp.File == nil || cp.File.State != statePartial)
}

func loadCheckpoint(ctx context.Context, s Store, sourceID string) (checkpoint, error) {
	cp := checkpoint{SourceID: sourceID}
	var complete uint8
	q := `SELECT log_format, lines, parsed, unknown, malformed, bytes, committed_offset, complete, first_ts, last_ts, version
FROM ingest_sources WHERE source_id = ? ORDER BY version DESC LIMIT 1`
	err := s.QueryRow(ctx, q, sourceID).Scan(&cp.Format, &cp.Records, &cp.Parsed, &cp.Unknown, &cp.Malformed,
		&cp.Bytes, &cp.Offset, &complete, &cp.FirstTS, &cp.LastTS, &cp.Version)
	if err != nil {
		if isNoRows(err) {
			return checkpoint{SourceID: sourceID}, nil
		}
		return cp, fmt.Errorf("read checkpoint: %w", err)
	}
	cp.Complete = complete == 1
	if cp.FirstTS.Unix() <= 0 {
		cp.FirstTS = time.Time{}
	}
	if cp.LastTS.Unix() <= 0 {
		cp.LastTS = time.Time{}
	}
	return cp, nil
}

// saveCheckpoints writes several checkpoints in one insert per table, with
// the same version: every source into ingest_sources (completeness
// reporting), then file sources into file_checkpoints, what a rerun
// resumes from. In that order a crash between the two leaves the resume
// point behind, never the report: the rerun redoes the gap (same keys)
// and writes both.
func saveCheckpoints(ctx context.Context, s Store, cps []checkpoint) error {
	now := time.Now().UTC()
	version := uint64(now.UnixNano())
	x, err := s.PrepareBatch(ctx, `INSERT INTO ingest_sources (source_id, path, node, role, log_format, first_ts, last_ts,
 lines, parsed, unknown, malformed, bytes, committed_offset, size, complete, updated_at, version)`)
	if err != nil {
		return fmt.Errorf("save checkpoints: %w", err)
	}
	for _, cp := range cps {
		if err := x.Append(cp.SourceID, cp.Path, cp.Node, cp.Role, cp.Format, chTime(cp.FirstTS), chTime(cp.LastTS),
			cp.Records, cp.Parsed, cp.Unknown, cp.Malformed, cp.Bytes, cp.Offset, cp.Size, boolU8(cp.stored()), now, version); err != nil {
			_ = x.Abort()
			return fmt.Errorf("save checkpoints: %w", err)
		}
	}
	if err := x.Send(); err != nil {
		return fmt.Errorf("save checkpoints: %w", err)
	}
	return saveFileCheckpoints(ctx, s, cps, now, version)
}

// saveNodes records how the sources' nodes are addressed, for correlation:
// one row per node with the union of its declared endpoints.
func saveNodes(ctx context.Context, s Store, sources []Source) error {
	type node struct {
		role string
		eps  []string
		seen map[string]bool
	}
	nodes := map[string]*node{}
	var order []string
	for _, src := range sources {
		if len(src.Endpoints) == 0 {
			continue
		}
		n := nodes[src.Node]
		if n == nil {
			n = &node{role: src.Role, seen: map[string]bool{}}
			nodes[src.Node] = n
			order = append(order, src.Node)
		}
		for _, ep := range src.Endpoints {
			if !n.seen[ep] {
				n.seen[ep] = true
				n.eps = append(n.eps, ep)
			}
		}
	}
	if len(order) == 0 {
		return nil
	}
	x, err := s.PrepareBatch(ctx, "INSERT INTO nodes (node, role, endpoints, updated_at, version)")
	if err != nil {
		return fmt.Errorf("record nodes: %w", err)
	}
	now := time.Now().UTC()
	for _, name := range order {
		n := nodes[name]
		if err := x.Append(name, n.role, n.eps, now, uint64(now.UnixNano())); err != nil {
			_ = x.Abort()
			return fmt.Errorf("record node %s: %w", name, err)
		}
	}
	if err := x.Send(); err != nil {
		return fmt.Errorf("record nodes: %w", err)
	}
	return nil
}

// CorrelationSpan is the time span of file checkpoints saved since the last
// completed correlation: what a correlation at ingest still has to link,
// including what a run killed before or during its correlation left.
type CorrelationSpan struct {
	From, To time.Time
	// Watermark is the newest checkpoint version the span covers; pass it
	// to MarkCorrelated once the span is linked.
	Watermark uint64
}

const stepCorrelate = "correlate"

// PendingCorrelation returns the span of the file sources whose
// checkpoints are newer than the last correlation's watermark (false when
// there is none). Checkpoints saved while the correlation runs are newer
// than its watermark and so are left for the next run.
func PendingCorrelation(ctx context.Context, s Store) (CorrelationSpan, bool, error) {
	var sp CorrelationSpan
	var n, watermark uint64
	// Two queries, not a subquery: on a cluster both tables are Distributed.
	if err := s.QueryRow(ctx, "SELECT max(watermark) FROM ingest_steps WHERE step = ?", stepCorrelate).Scan(&watermark); err != nil {
		return sp, false, fmt.Errorf("read correlation step: %w", err)
	}
	q := `SELECT count(), min(first_ts), max(last_ts), max(v) FROM (
 SELECT argMax(first_ts, version) AS first_ts, argMax(last_ts, version) AS last_ts, max(version) AS v
 FROM file_checkpoints GROUP BY node, source_id)
WHERE v > ? AND first_ts > toDateTime(0)`
	if err := s.QueryRow(ctx, q, watermark).Scan(&n, &sp.From, &sp.To, &sp.Watermark); err != nil {
		return sp, false, fmt.Errorf("read pending correlation: %w", err)
	}
	if n == 0 {
		return sp, false, nil
	}
	sp.From, sp.To = sp.From.UTC(), sp.To.UTC().Add(time.Second) // DateTime seconds; the end is exclusive
	return sp, true, nil
}

// MarkCorrelated records that the span up to sp.Watermark is linked.
func MarkCorrelated(ctx context.Context, s Store, sp CorrelationSpan, requests int) error {
	now := time.Now().UTC()
	err := s.Exec(ctx, `INSERT INTO ingest_steps (step, watermark, span_from, span_to, requests, updated_at, version)
 SELECT ?, ?, ?, ?, ?, ?, ?`, stepCorrelate, sp.Watermark, chTime(sp.From), chTime(sp.To), uint64(requests), now, uint64(now.UnixNano()))
	if err != nil {
		return fmt.Errorf("record correlation: %w", err)
	}
	return nil
}
