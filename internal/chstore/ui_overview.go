package chstore

import (
	"github.com/kvtrail/kvtrail/domain"

	"context"
	"fmt"
	"sync"
	"time"
)

func (s UIStore) FindingBuckets(ctx context.Context) ([]domain.FindingBucket, error) {
	versions, err := s.currentVersions(ctx)
	if err != nil {
		return nil, err
	}
	var out []domain.FindingBucket
	err = s.Store.Select(ctx, &out, `SELECT toStartOfHour(ts) AS hour, analyzer, severity, count() AS n
FROM `+uiCurrentFindings+` GROUP BY hour, analyzer, severity ORDER BY hour, analyzer, severity`, versions)
	if err != nil {
		return nil, fmt.Errorf("finding buckets: %w", err)
	}
	return out, nil
}

func (s UIStore) Fleet(ctx context.Context) ([]domain.NodeLimits, error) {
	var out []domain.NodeLimits
	err := s.Store.Select(ctx, &out, `SELECT node, role, boot_ts, boot_id, sglang_version, context_len, max_total_num_tokens,
 max_req_input_len, max_prefill_tokens, max_running_requests, kv_pool_tokens, page_size, dp_size, allow_auto_truncate
FROM node_boots FINAL ORDER BY node, boot_ts LIMIT 10000`)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	return out, nil
}

func (s UIStore) Sources(ctx context.Context) ([]domain.IngestSource, error) {
	var out []domain.IngestSource
	err := s.Store.Select(ctx, &out, `SELECT source_id, path, node, role, log_format, first_ts, last_ts, lines, parsed, unknown,
 malformed, bytes, committed_offset, size, complete, updated_at
FROM ingest_sources FINAL ORDER BY node, log_format, first_ts, path LIMIT 100000`)
	if err != nil {
		return nil, fmt.Errorf("sources: %w", err)
	}
	return out, nil
}

// Gaps follow the completeness analyzer's rule (domain.FindSilences
// through Silences), over all ingested data from gapFloor on: lines without a
// time of their own (Prometheus text without timestamps, stored at the Unix
// epoch) are not a node's log and once made "1970 → 2026" gaps.
var uiGapFloor = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// uiGapCeiling bounds the window above (the analyzer's window is 32-bit
// seconds).
var uiGapCeiling = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// uiGapCache keeps the last computation per store until ingest moves on:
// counting every minute of raw_lines is the overview's one full read.
type uiGapCache struct {
	mu      sync.Mutex
	version string
	gaps    []domain.NodeGap
}

var uiGapCaches sync.Map // *Store -> *uiGapCache

// Gaps finds the per-node silences in all ingested data.
func (s UIStore) Gaps(ctx context.Context) ([]domain.NodeGap, error) {
	var version string
	if err := s.Store.QueryRow(ctx, "SELECT toString(max(version)) FROM ingest_sources").Scan(&version); err != nil {
		return nil, fmt.Errorf("ingest version: %w", err)
	}
	v, _ := uiGapCaches.LoadOrStore(s.Store, &uiGapCache{})
	gc := v.(*uiGapCache)
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.version == version && version != "" {
		return gc.gaps, nil
	}
	found, err := s.Silences(ctx, uiGapFloor, uiGapCeiling, s.GapThreshold)
	if err != nil {
		return nil, err
	}
	gaps := make([]domain.NodeGap, 0, len(found))
	for _, g := range found {
		gaps = append(gaps, domain.NodeGap{Node: g.Node, From: g.From, To: g.To, Minutes: int(g.To.Sub(g.From) / time.Minute)})
	}
	gc.version, gc.gaps = version, gaps
	return gaps, nil
}

func (s UIStore) HighFindings(ctx context.Context, limit int) ([]domain.FindingView, error) {
	versions, err := s.currentVersions(ctx)
	if err != nil {
		return nil, err
	}
	var out []domain.FindingView
	err = s.Store.Select(ctx, &out, "SELECT "+uiFindingCols+" FROM "+uiCurrentFindings+" WHERE upper(severity) = 'HIGH' ORDER BY ts DESC, finding_id DESC LIMIT ?",
		versions, limit)
	if err != nil {
		return nil, fmt.Errorf("high findings: %w", err)
	}
	uiFixFindings(out)
	return out, s.fillForeignFromReconstruction(ctx, out)
}
