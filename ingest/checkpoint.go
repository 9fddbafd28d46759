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
	FirstTS  time.Time
	LastTS   time.Time
	Offset   uint64
	Size     uint64
	Complete bool
	// Version is when it was saved (UnixNano, the row's version): a forced
	// run that is retrying keeps the checkpoints it saved itself.
	Version uint64
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

// saveCheckpoints writes several checkpoints in one insert.
func saveCheckpoints(ctx context.Context, s Store, cps []checkpoint) error {
	x, err := s.PrepareBatch(ctx, `INSERT INTO ingest_sources (source_id, path, node, role, log_format, first_ts, last_ts,
 lines, parsed, unknown, malformed, bytes, committed_offset, size, complete, updated_at, version)`)
	if err != nil {
		return fmt.Errorf("save checkpoints: %w", err)
	}
	now := time.Now().UTC()
	version := uint64(now.UnixNano())
	for _, cp := range cps {
		if err := x.Append(cp.SourceID, cp.Path, cp.Node, cp.Role, cp.Format, chTime(cp.FirstTS), chTime(cp.LastTS),
			cp.Records, cp.Parsed, cp.Unknown, cp.Malformed, cp.Bytes, cp.Offset, cp.Size, boolU8(cp.Complete), now, version); err != nil {
			_ = x.Abort()
			return fmt.Errorf("save checkpoints: %w", err)
		}
	}
	if err := x.Send(); err != nil {
		return fmt.Errorf("save checkpoints: %w", err)
	}
	return nil
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
