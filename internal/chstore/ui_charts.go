package chstore

import (
	"github.com/kvtrail/kvtrail/domain"

	"context"
	"fmt"
	"time"
)

// CaseBuckets counts, per hour, analyzer and severity, the distinct
// requests that findings of the latest runs name in [from, to).
func (s UIStore) CaseBuckets(ctx context.Context, from, to time.Time) ([]domain.CaseBucket, error) {
	versions, err := s.currentVersions(ctx)
	if err != nil {
		return nil, err
	}
	var out []domain.CaseBucket
	err = s.Store.Select(ctx, &out, `SELECT toStartOfHour(ts) AS hour, analyzer, severity, uniqExact(request_key) AS n
FROM `+uiCurrentFindings+` WHERE ts >= ? AND ts < ? AND request_key != ''
GROUP BY hour, analyzer, severity ORDER BY hour, analyzer, severity`, versions, uiUTC(from), uiUTC(to))
	if err != nil {
		return nil, fmt.Errorf("case buckets: %w", err)
	}
	return out, nil
}

// PromptPoints summarizes each prefill node's prompts per hour in
// [from, to) from request_facts: the longest, how many the prefill
// rejected, and the limit the correlator recorded.
func (s UIStore) PromptPoints(ctx context.Context, from, to time.Time) ([]domain.PromptPoint, error) {
	var out []domain.PromptPoint
	err := s.Store.Select(ctx, &out, `SELECT prefill_node AS node, toStartOfHour(ts) AS hour, max(prefill_prompt_tokens) AS max_prompt,
 uniqExactIf(request_key, prefill_rejected = 1) AS over, uniqExact(request_key) AS n, max(prefill_limit) AS lim
FROM request_facts WHERE ts >= ? AND ts < ? AND prefill_node != ''
GROUP BY node, hour ORDER BY node, hour`, uiUTC(from), uiUTC(to))
	if err != nil {
		return nil, fmt.Errorf("prompt points: %w", err)
	}
	return out, nil
}
