package analyze

import (
	"context"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/posture"
)

// Evidence is what a run reads (internal/chstore.Store has it). Reads of
// many rows stream them to a callback in the store's order, so the
// analysis can later work through a window lane by lane rather than hold
// it whole; a callback's error ends the read and is returned.
type Evidence interface {
	// AnalysisDataSpan is the span of the request-level lines and the
	// ingest watermark, which fill an open window.
	AnalysisDataSpan(ctx context.Context) (domain.DataSpan, error)
	NodeBoots(ctx context.Context) (*domain.Boots, error)
	NodeEndpoints(ctx context.Context) (map[string]string, error)
	// ScanGatewayResponses: the responses of [w.From, w.To), each once.
	ScanGatewayResponses(ctx context.Context, w domain.Window, fn func(*domain.GatewayResponse) error) error
	// ScanEngineEvents and ScanTransferEvents: the lines of [from, to]
	// (whole seconds), in time order, each once.
	ScanEngineEvents(ctx context.Context, from, to time.Time, fn func(*domain.EngineEvent) error) error
	ScanTransferEvents(ctx context.Context, from, to time.Time, fn func(*domain.TransferEvent) error) error
	// DecodeNodes and ScanDecodeNodeLines: the nodes with decode
	// Receive/Finish lines in [from, to], and one node's lines in time
	// order (the allocator replay's input, one stream per node).
	DecodeNodes(ctx context.Context, from, to time.Time) ([]string, error)
	ScanDecodeNodeLines(ctx context.Context, from, to time.Time, node string, fn func(*domain.EngineEvent) error) error
	// DecodeReleaseTimeouts: when a deferred KV release timed out on node in
	// [from, to], per room (the first): the replay frees an aborted
	// request's pages then, not at its Finish.
	DecodeReleaseTimeouts(ctx context.Context, from, to time.Time, node string) (map[uint64]time.Time, error)
	// PageEventNodes and ScanPageEvents: the nodes that log page events,
	// and their events ordered by node, DP rank, then time.
	PageEventNodes(ctx context.Context) ([]string, error)
	ScanPageEvents(ctx context.Context, from, to time.Time, fn func(*domain.PageEvent) error) error
	// RoomOwners: the gateway responses of these rooms, whatever their time.
	RoomOwners(ctx context.Context, rooms []uint64) ([]domain.GatewayResponse, error)
	ProbeVerdicts(ctx context.Context, from, to time.Time) ([]domain.ProbeVerdict, error)
	ProbeMarkers(ctx context.Context, markers []string) (map[string]domain.ProbeMarker, error)
	// Silences applies the one gap rule (domain.FindSilences) to [from, to).
	Silences(ctx context.Context, from, to time.Time, threshold time.Duration) ([]domain.Silence, error)
	// The reads of an analysis in slices (slices.go): requests per time
	// bucket, the prefill host votes of the node map, saved facts of this
	// run by key, room or decode node (by room without their lines, for
	// the owners of writer rooms), the lines they were linked from,
	// and the impossible-speed fit's points (or those under its bounds)
	// picked by the server.
	RequestCounts(ctx context.Context, from, to time.Time, step time.Duration) ([]domain.Bucket, error)
	PrefillHostVotes(ctx context.Context, from, to time.Time) (map[string]map[string]int, error)
	RunFactRefs(ctx context.Context, version uint64, from, to time.Time, keys []string, rooms []uint64) ([]domain.FactRef, error)
	RoomOwnerRefs(ctx context.Context, version uint64, from, to time.Time, rooms []uint64) ([]domain.FactRef, error)
	DecodeFactRefs(ctx context.Context, version uint64, from, to time.Time, node string) ([]domain.FactRef, error)
	DecodeReceiveLines(ctx context.Context, from, to time.Time, node string) ([]uint64, error)
	EvidenceByLines(ctx context.Context, from, to time.Time, ids []uint64, ev domain.EvidenceSink) error
	ScanSpeedPoints(ctx context.Context, version uint64, from, to time.Time, fn func(domain.SpeedPoint) error) error
	ScanSpeedSuspects(ctx context.Context, version uint64, from, to time.Time, b domain.SpeedBounds, fn func(domain.SpeedPoint) error) error
	// posture.DB is what posture.Load reads the fleet's settings through
	// (the posture_regression analyzer).
	posture.DB
}

// Results is what a run records and the reads that decide what it adds
// (internal/chstore.Store has it).
type Results interface {
	// RequestFactsInsert builds the request_facts rows of facts with this
	// version, adds them to dg unless it is nil, and returns what sends
	// them.
	RequestFactsInsert(facts []*domain.Request, version uint64, dg *domain.FactDigest) func(context.Context) error
	// SaveFactLink records what a link of requests saved; LatestFactLink
	// reads the newest such record, and LinkRows counts the rows of
	// gateway-logged requests in [from, to] saved at a link's version
	// (at) and at a later one (later: those that would replace the link's
	// rows when the table merges).
	SaveFactLink(ctx context.Context, l domain.FactLink) error
	LatestFactLink(ctx context.Context) (domain.FactLink, bool, error)
	LinkRows(ctx context.Context, version uint64, from, to time.Time) (at, later uint64, err error)
	SaveRun(ctx context.Context, r domain.Run) error
	SaveFindings(ctx context.Context, fs []domain.Finding, now time.Time) error
	KnownFindingIDs(ctx context.Context, analyzer, version string) (map[string]bool, error)
	// LatestFindingsWhere: the current findings (domain.CurrentRunIDs'
	// rule) whose current copy passes floor (nil: all), filtered by the
	// server, and that keep accepts (nil: all), filtered as they are read.
	LatestFindingsWhere(ctx context.Context, floor domain.SeverityFloor, keep func(*domain.Finding) bool) ([]domain.Finding, error)
	SaveAffected(ctx context.Context, id, caseID string, created time.Time, rows []domain.AffectedRow) error
	// StageAffected starts a notification list stored as it is folded.
	StageAffected() domain.AffectedStage
	SaveFindingForeign(ctx context.Context, fs []domain.Finding) error
	AffectedReader
}

// AffectedReader reads the notification list back.
type AffectedReader interface {
	LatestReconstruction(ctx context.Context) (id string, created time.Time, err error)
	AffectedRows(ctx context.Context, id string) (caseID string, rows []domain.AffectedRow, err error)
}

// Store is everything a Runner needs.
type Store interface {
	Evidence
	Results
}
