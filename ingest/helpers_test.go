package ingest_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/freeport"
	"github.com/kvtrail/kvtrail/migrations"
)

func migrationsFS() fs.FS { return migrations.FS }

// downStore is a ClickHouse that never answers.
type downStore struct{}

var errRefused = errors.New("connection refused")

func (downStore) OpenInsert(context.Context, string, []string) (ingest.TableWriter, error) {
	return nil, errRefused
}
func (downStore) Ping(context.Context) error { return errRefused }
func (downStore) LatestSourceCheckpoint(context.Context, string) (ingest.Checkpoint, bool, error) {
	return ingest.Checkpoint{}, false, errRefused
}
func (downStore) FileCheckpointCandidates(context.Context, string, uint32, string) ([]ingest.Checkpoint, error) {
	return nil, errRefused
}
func (downStore) LegacySourceCheckpoints(context.Context, string, string) ([]ingest.LegacySource, error) {
	return nil, errRefused
}
func (downStore) SaveSourceCheckpoints(context.Context, []ingest.Checkpoint, time.Time, uint64) error {
	return errRefused
}
func (downStore) SaveFileCheckpoints(context.Context, []ingest.Checkpoint, time.Time, uint64) error {
	return errRefused
}
func (downStore) SaveNodeEndpoints(context.Context, []ingest.NodeEndpoints, time.Time) error {
	return errRefused
}
func (downStore) StepWatermark(context.Context, string) (uint64, error) { return 0, errRefused }
func (downStore) FileSpanSince(context.Context, uint64) (ingest.CorrelationSpan, uint64, error) {
	return ingest.CorrelationSpan{}, 0, errRefused
}
func (downStore) RecordStep(context.Context, string, ingest.CorrelationSpan, uint64, time.Time) error {
	return errRefused
}
func (downStore) StoredLineIDs(context.Context, []ingest.LineSpan) ([]uint64, error) {
	return nil, errRefused
}

// freeTCPPort is a port for a server the test starts (and restarts) on
// it: picked below the ephemeral range, so no client connection of the
// suite takes it meanwhile (internal/freeport).
func freeTCPPort(t *testing.T) int {
	t.Helper()
	p, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
