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
}

func loadCheckpoint(ctx context.Context, s Store, sourceID string) (checkpoint, error) {
	cp := checkpoint{SourceID: sourceID}
	var complete uint8
	q := `SELECT log_format, lines, parsed, unknown, malformed, committed_offset, complete, first_ts, last_ts
FROM ingest_sources WHERE source_id = ? ORDER BY version DESC LIMIT 1`
	err := s.QueryRow(ctx, q, sourceID).Scan(&cp.Format, &cp.Records, &cp.Parsed, &cp.Unknown, &cp.Malformed,
		&cp.Offset, &complete, &cp.FirstTS, &cp.LastTS)
	if err != nil {
		if isNoRows(err) {
			return checkpoint{SourceID: sourceID}, nil
		}
		return cp, fmt.Errorf("read checkpoint: %w", err)
	}
	cp.Bytes = cp.Offset
	cp.Complete = complete == 1
	if cp.FirstTS.Unix() <= 0 {
		cp.FirstTS = time.Time{}
	}
	if cp.LastTS.Unix() <= 0 {
		cp.LastTS = time.Time{}
	}
	return cp, nil
}

func saveCheckpoint(ctx context.Context, s Store, cp checkpoint) error {
	q := `INSERT INTO ingest_sources (source_id, path, node, role, log_format, first_ts, last_ts, lines, parsed, unknown,
 malformed, bytes, committed_offset, size, complete, updated_at, version)
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now(), ?`
	err := s.Exec(ctx, q, cp.SourceID, cp.Path, cp.Node, cp.Role, cp.Format, chTime(cp.FirstTS), chTime(cp.LastTS),
		cp.Records, cp.Parsed, cp.Unknown, cp.Malformed, cp.Offset, cp.Offset, cp.Size, boolU8(cp.Complete),
		uint64(time.Now().UnixNano()))
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

// saveNode records how a source's node is addressed, for correlation.
func saveNode(ctx context.Context, s Store, src Source) error {
	q := "INSERT INTO nodes (node, role, endpoints, updated_at, version) SELECT ?, ?, ?, now(), ?"
	if err := s.Exec(ctx, q, src.Node, src.Role, src.Endpoints, uint64(time.Now().UnixNano())); err != nil {
		return fmt.Errorf("record node %s: %w", src.Node, err)
	}
	return nil
}
