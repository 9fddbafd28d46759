package ingest

import (
	"context"
	"time"
)

// TableWriter is one open INSERT into one table, fed in native blocks (the
// identical type internal/chstore.TableWriter names): appended rows are
// held until Flush sends them as a block of the same INSERT, and are
// stored only once Send returns nil.
type TableWriter = interface {
	// AppendColumns appends one slice per column, in the order the
	// INSERT was opened with; all of the same length.
	AppendColumns(cols ...any) error
	// AppendRow appends one row, one value per column.
	AppendRow(vals ...any) error
	// Rows is how many rows are held, not yet flushed.
	Rows() int
	// Flush sends the held rows as one block of the open INSERT.
	Flush() error
	// Send ends the INSERT.
	Send() error
	// Abort drops the INSERT without storing what was not sent.
	Abort() error
}

// Store is what ingest needs from ClickHouse; internal/chstore.Store
// implements it, and holds every statement.
type Store interface {
	// OpenInsert opens one INSERT into table naming columns, in order.
	OpenInsert(ctx context.Context, table string, columns []string) (TableWriter, error)
	// Ping checks the server answers.
	Ping(ctx context.Context) error
	CheckpointStore
}

// CheckpointStore keeps the sources' checkpoints, the nodes' endpoints
// and the correlation step: what makes a rerun resume instead of redo.
type CheckpointStore interface {
	// LatestSourceCheckpoint is a source's latest ingest_sources row
	// (false when there is none). File is not set.
	LatestSourceCheckpoint(ctx context.Context, sourceID string) (Checkpoint, bool, error)
	// FileCheckpointCandidates are the latest checkpoints of node's file
	// sources whose head is headLen bytes with digest headDigest, or
	// shorter than headLen (the caller verifies those). File is set.
	FileCheckpointCandidates(ctx context.Context, node string, headLen uint32, headDigest string) ([]Checkpoint, error)
	// LegacySourceCheckpoints are node and path's sources saved before
	// file_checkpoints existed (no row there).
	LegacySourceCheckpoints(ctx context.Context, node, path string) ([]LegacySource, error)
	// SaveSourceCheckpoints writes every checkpoint's ingest_sources row.
	SaveSourceCheckpoints(ctx context.Context, cps []Checkpoint, now time.Time, version uint64) error
	// SaveFileCheckpoints writes the file_checkpoints row of every
	// checkpoint with File set.
	SaveFileCheckpoints(ctx context.Context, cps []Checkpoint, now time.Time, version uint64) error
	// SaveNodeEndpoints records how nodes are addressed (nodes).
	SaveNodeEndpoints(ctx context.Context, nodes []NodeEndpoints, now time.Time) error
	// StepWatermark is the newest watermark recorded for step (0 if none).
	StepWatermark(ctx context.Context, step string) (uint64, error)
	// FileSpanSince is the span of the file sources whose latest
	// checkpoint version is above watermark and that hold timed lines;
	// n is how many there are, 0 when none.
	FileSpanSince(ctx context.Context, watermark uint64) (sp CorrelationSpan, n uint64, err error)
	// RecordStep records that step covered sp.
	RecordStep(ctx context.Context, step string, sp CorrelationSpan, requests uint64, now time.Time) error
	// StoredLineIDs are the raw_lines ids already stored in spans.
	StoredLineIDs(ctx context.Context, spans []LineSpan) ([]uint64, error)
}

// LegacySource is a source checkpoint from before file_checkpoints: its
// id was the SHA-256 of the first Size bytes of the file.
type LegacySource struct {
	SourceID string
	Size     uint64
	Offset   uint64
	Version  uint64
}

// NodeEndpoints is one node and the endpoints gateway logs use for it.
type NodeEndpoints struct {
	Node, Role string
	Endpoints  []string
}

// LineSpan is a time span of one stream's lines on one node. Lines
// stored before migration 0013 are found by their FileDigest, lines
// stored since by their SourceRef (SourceRef of the node, the source and
// FileDigest).
type LineSpan struct {
	Node       string
	FileDigest string
	SourceRef  uint64
	From, To   time.Time
}
