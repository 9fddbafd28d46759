package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// Checkpoint is a source's row in ingest_sources: how far it was committed
// and what was counted up to there (completeness accounting).
type Checkpoint struct {
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
	File *FileState
	// Version is when it was saved (UnixNano, the row's version): a forced
	// run that is retrying keeps the checkpoints it saved itself.
	Version uint64
}

// checkpoint is the name the package's code uses.
type checkpoint = Checkpoint

// Stored is the complete flag as saved: a partial file is not complete.
func (cp Checkpoint) Stored() bool {
	return cp.Complete && (cp.File == nil || cp.File.State != statePartial)
}

func loadCheckpoint(ctx context.Context, s Store, sourceID string) (checkpoint, error) {
	cp, ok, err := s.LatestSourceCheckpoint(ctx, sourceID)
	if err != nil {
		return checkpoint{SourceID: sourceID}, fmt.Errorf("read checkpoint: %w", err)
	}
	if !ok {
		return checkpoint{SourceID: sourceID}, nil
	}
	cp.SourceID = sourceID
	return cp.zeroEpoch(), nil
}

// zeroEpoch reads the stored epoch (DateTime's zero) of a source with no
// timed line yet back as the zero time.
func (cp checkpoint) zeroEpoch() checkpoint {
	if cp.FirstTS.Unix() <= 0 {
		cp.FirstTS = time.Time{}
	}
	if cp.LastTS.Unix() <= 0 {
		cp.LastTS = time.Time{}
	}
	return cp
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
	if err := s.SaveSourceCheckpoints(ctx, cps, now, version); err != nil {
		return fmt.Errorf("save checkpoints: %w", err)
	}
	if err := s.SaveFileCheckpoints(ctx, cps, now, version); err != nil {
		return fmt.Errorf("save file checkpoints: %w", err)
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
	list := make([]NodeEndpoints, 0, len(order))
	for _, name := range order {
		list = append(list, NodeEndpoints{Node: name, Role: nodes[name].role, Endpoints: nodes[name].eps})
	}
	if err := s.SaveNodeEndpoints(ctx, list, time.Now().UTC()); err != nil {
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
func PendingCorrelation(ctx context.Context, s CheckpointStore) (CorrelationSpan, bool, error) {
	// Two reads, not a subquery: on a cluster both tables are Distributed.
	watermark, err := s.StepWatermark(ctx, stepCorrelate)
	if err != nil {
		return CorrelationSpan{}, false, fmt.Errorf("read correlation step: %w", err)
	}
	sp, n, err := s.FileSpanSince(ctx, watermark)
	if err != nil {
		return sp, false, fmt.Errorf("read pending correlation: %w", err)
	}
	if n == 0 {
		return sp, false, nil
	}
	sp.From, sp.To = sp.From.UTC(), sp.To.UTC().Add(time.Second) // DateTime seconds; the end is exclusive
	return sp, true, nil
}

// MarkCorrelated records that the span up to sp.Watermark is linked.
func MarkCorrelated(ctx context.Context, s CheckpointStore, sp CorrelationSpan, requests int) error {
	if err := s.RecordStep(ctx, stepCorrelate, sp, uint64(requests), time.Now().UTC()); err != nil {
		return fmt.Errorf("record correlation: %w", err)
	}
	return nil
}

// Linker links the requests of a window across nodes into request_facts
// (analyze.Runner.Correlate; maxRequests 0: its own slices).
type Linker interface {
	Correlate(ctx context.Context, w domain.Window, maxRequests int) (int, error)
}

// LinkSpan links a pending span's requests and records the span as
// linked: what `kvtrail ingest` does after its lines. The span is widened
// by margin on both sides, since requests already in whose other side
// just arrived (a gateway line a little before the new engine lines) are
// within one link margin of it. It returns the window linked and the
// requests saved.
func LinkSpan(ctx context.Context, s CheckpointStore, l Linker, sp CorrelationSpan, margin time.Duration) (domain.Window, int, error) {
	margin = max(margin, 0)
	w := domain.Window{From: sp.From.Add(-margin), To: sp.To.Add(margin)}
	n, err := l.Correlate(ctx, w, 0)
	if err != nil {
		return w, n, fmt.Errorf("link requests (request_facts): %w", err)
	}
	if err := MarkCorrelated(ctx, s, sp, n); err != nil {
		return w, n, fmt.Errorf("link requests (request_facts): %w", err)
	}
	return w, n, nil
}
