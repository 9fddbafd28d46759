package chstore

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/kvtrail/kvtrail/ingest"
)

// IngestConn is the part of a connection ingest's statements run on:
// *Store, or another engine speaking the driver's types (the in-process
// modern engine of internal/chdbstore).
type IngestConn interface {
	QueryRow(ctx context.Context, sql string, args ...any) driver.Row
	PrepareBatch(ctx context.Context, insert string) (driver.Batch, error)
	Exec(ctx context.Context, sql string, args ...any) error
}

// IngestStatements runs ingest's statements (ingest.Store) on a connection.
// *Store has the same methods, run on itself.
type IngestStatements struct{ c IngestConn }

var (
	_ ingest.Store = IngestStatements{}
	_ ingest.Store = (*Store)(nil)
)

// Ping checks the connection answers a query.
func (s IngestStatements) Ping(ctx context.Context) error {
	var one uint8
	return s.c.QueryRow(ctx, "SELECT toUInt8(1)").Scan(&one)
}

func (s *Store) ingest() IngestStatements { return IngestStatements{c: s} }

// LatestSourceCheckpoint: see IngestStatements.LatestSourceCheckpoint.
func (s *Store) LatestSourceCheckpoint(ctx context.Context, sourceID string) (ingest.Checkpoint, bool, error) {
	return s.ingest().LatestSourceCheckpoint(ctx, sourceID)
}

// FileCheckpointCandidates: see IngestStatements.FileCheckpointCandidates.
func (s *Store) FileCheckpointCandidates(ctx context.Context, node string, headLen uint32, headDigest string) ([]ingest.Checkpoint, error) {
	return s.ingest().FileCheckpointCandidates(ctx, node, headLen, headDigest)
}

// FileCheckpointsOnNode: see IngestStatements.FileCheckpointsOnNode.
func (s *Store) FileCheckpointsOnNode(ctx context.Context, node string) ([]ingest.Checkpoint, error) {
	return s.ingest().FileCheckpointsOnNode(ctx, node)
}

// LegacySourcePaths: see IngestStatements.LegacySourcePaths.
func (s *Store) LegacySourcePaths(ctx context.Context) ([]ingest.NodePath, error) {
	return s.ingest().LegacySourcePaths(ctx)
}

// LegacySourceCheckpoints: see IngestStatements.LegacySourceCheckpoints.
func (s *Store) LegacySourceCheckpoints(ctx context.Context, node, path string) ([]ingest.LegacySource, error) {
	return s.ingest().LegacySourceCheckpoints(ctx, node, path)
}

// SaveSourceCheckpoints: see IngestStatements.SaveSourceCheckpoints.
func (s *Store) SaveSourceCheckpoints(ctx context.Context, cps []ingest.Checkpoint, now time.Time, version uint64) error {
	return s.ingest().SaveSourceCheckpoints(ctx, cps, now, version)
}

// SaveFileCheckpoints: see IngestStatements.SaveFileCheckpoints.
func (s *Store) SaveFileCheckpoints(ctx context.Context, cps []ingest.Checkpoint, now time.Time, version uint64) error {
	return s.ingest().SaveFileCheckpoints(ctx, cps, now, version)
}

// SaveNodeEndpoints: see IngestStatements.SaveNodeEndpoints.
func (s *Store) SaveNodeEndpoints(ctx context.Context, nodes []ingest.NodeEndpoints, now time.Time) error {
	return s.ingest().SaveNodeEndpoints(ctx, nodes, now)
}

// StepWatermark: see IngestStatements.StepWatermark.
func (s *Store) StepWatermark(ctx context.Context, step string) (uint64, error) {
	return s.ingest().StepWatermark(ctx, step)
}

// FileSpanSince: see IngestStatements.FileSpanSince.
func (s *Store) FileSpanSince(ctx context.Context, watermark uint64) (ingest.CorrelationSpan, uint64, error) {
	return s.ingest().FileSpanSince(ctx, watermark)
}

// RecordStep: see IngestStatements.RecordStep.
func (s *Store) RecordStep(ctx context.Context, step string, sp ingest.CorrelationSpan, requests uint64, now time.Time) error {
	return s.ingest().RecordStep(ctx, step, sp, requests, now)
}

// StoredLineIDs: see IngestStatements.StoredLineIDs.
func (s *Store) StoredLineIDs(ctx context.Context, spans []ingest.LineSpan) ([]uint64, error) {
	return s.ingest().StoredLineIDs(ctx, spans)
}
