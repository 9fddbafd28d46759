package web

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kvtrail/kvtrail/analyze"
)

// FindingBucket is the number of findings of one analyzer and severity in
// one hour.
type FindingBucket struct {
	Hour     time.Time `ch:"hour" json:"hour"`
	Analyzer string    `ch:"analyzer" json:"analyzer"`
	Severity string    `ch:"severity" json:"severity"`
	N        uint64    `ch:"n" json:"count"`
}

// SourceRow is one ingest source with its completeness counters.
type SourceRow struct {
	SourceID        string    `ch:"source_id" json:"source_id"`
	Path            string    `ch:"path" json:"path"`
	Node            string    `ch:"node" json:"node"`
	Role            string    `ch:"role" json:"role"`
	LogFormat       string    `ch:"log_format" json:"log_format"`
	FirstTS         time.Time `ch:"first_ts" json:"first_ts"`
	LastTS          time.Time `ch:"last_ts" json:"last_ts"`
	Lines           uint64    `ch:"lines" json:"lines"`
	Parsed          uint64    `ch:"parsed" json:"parsed"`
	Unknown         uint64    `ch:"unknown" json:"unknown"`
	Malformed       uint64    `ch:"malformed" json:"malformed"`
	Bytes           uint64    `ch:"bytes" json:"bytes"`
	CommittedOffset uint64    `ch:"committed_offset" json:"committed_offset"`
	Size            uint64    `ch:"size" json:"size"`
	Complete        uint8     `ch:"complete" json:"complete"`
	UpdatedAt       time.Time `ch:"updated_at" json:"updated_at"`
}

// Pushed reports a source that arrives through the push endpoints (Loki
// push, /ingest/v1/lines): a stream, with no file size or end to reach.
func (r SourceRow) Pushed() bool { return r.Size == 0 && r.CommittedOffset == 0 }

// Incomplete reports a file source not read to its end. A pushed stream is
// never "incomplete": it has no end.
func (r SourceRow) Incomplete() bool {
	return !r.Pushed() && (r.Complete == 0 || r.CommittedOffset < r.Size)
}

// Gap is a stretch in which a node logged nothing while the rest of the
// fleet did, found by analyze's completeness rule (see Gaps).
type Gap struct {
	Node    string    `json:"node"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Minutes int       `json:"minutes"`
}

func (s chStore) FindingBuckets(ctx context.Context) ([]FindingBucket, error) {
	versions, err := s.currentVersions(ctx)
	if err != nil {
		return nil, err
	}
	var out []FindingBucket
	err = s.c.Select(ctx, &out, `SELECT toStartOfHour(ts) AS hour, analyzer, severity, count() AS n
FROM `+currentFindings+` GROUP BY hour, analyzer, severity ORDER BY hour, analyzer, severity`, versions)
	if err != nil {
		return nil, fmt.Errorf("finding buckets: %w", err)
	}
	return out, nil
}

func (s chStore) Fleet(ctx context.Context) ([]NodeLimits, error) {
	var out []NodeLimits
	err := s.c.Select(ctx, &out, `SELECT node, role, boot_ts, boot_id, sglang_version, context_len, max_total_num_tokens,
 max_req_input_len, max_prefill_tokens, max_running_requests, kv_pool_tokens, page_size, dp_size, allow_auto_truncate
FROM node_boots FINAL ORDER BY node, boot_ts LIMIT 10000`)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	return out, nil
}

func (s chStore) Sources(ctx context.Context) ([]SourceRow, error) {
	var out []SourceRow
	err := s.c.Select(ctx, &out, `SELECT source_id, path, node, role, log_format, first_ts, last_ts, lines, parsed, unknown,
 malformed, bytes, committed_offset, size, complete, updated_at
FROM ingest_sources FINAL ORDER BY node, log_format, first_ts, path LIMIT 100000`)
	if err != nil {
		return nil, fmt.Errorf("sources: %w", err)
	}
	return out, nil
}

// Gaps follow analyze's rule (domain.FindSilences, the completeness
// analyzer's), over all ingested data from gapFloor on: lines without a
// time of their own (Prometheus text without timestamps, stored at the Unix
// epoch) are not a node's log and once made "1970 → 2026" gaps.
var gapFloor = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// gapCeiling bounds the window above (the analyzer's window is 32-bit
// seconds).
var gapCeiling = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// gapCache keeps the last computation per store until ingest moves on:
// counting every minute of raw_lines is the overview's one full read.
type gapCache struct {
	mu      sync.Mutex
	version string
	gaps    []Gap
}

var gapCaches sync.Map // Conn -> *gapCache

// Gaps finds the per-node silences in all ingested data.
func (s chStore) Gaps(ctx context.Context) ([]Gap, error) {
	var version string
	if err := s.c.QueryRow(ctx, "SELECT toString(max(version)) FROM ingest_sources").Scan(&version); err != nil {
		return nil, fmt.Errorf("ingest version: %w", err)
	}
	v, _ := gapCaches.LoadOrStore(s.c, &gapCache{})
	gc := v.(*gapCache)
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.version == version && version != "" {
		return gc.gaps, nil
	}
	r, err := s.current()
	if err != nil {
		return nil, err
	}
	found, err := r.Silences(ctx, gapFloor, gapCeiling, analyze.DefaultConfig().GapThreshold)
	if err != nil {
		return nil, err
	}
	gaps := make([]Gap, 0, len(found))
	for _, g := range found {
		gaps = append(gaps, Gap{Node: g.Node, From: g.From, To: g.To, Minutes: int(g.To.Sub(g.From) / time.Minute)})
	}
	gc.version, gc.gaps = version, gaps
	return gaps, nil
}

func (s chStore) HighFindings(ctx context.Context, limit int) ([]Finding, error) {
	versions, err := s.currentVersions(ctx)
	if err != nil {
		return nil, err
	}
	var out []Finding
	err = s.c.Select(ctx, &out, "SELECT "+findingCols+" FROM "+currentFindings+" WHERE upper(severity) = 'HIGH' ORDER BY ts DESC, finding_id DESC LIMIT ?",
		versions, limit)
	if err != nil {
		return nil, fmt.Errorf("high findings: %w", err)
	}
	fixFindings(out)
	return out, s.fillForeignFromReconstruction(ctx, out)
}
