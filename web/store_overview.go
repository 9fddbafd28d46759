package web

import (
	"context"
	"fmt"
	"time"
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

// Incomplete reports a source not read to its end.
func (r SourceRow) Incomplete() bool { return r.Complete == 0 || r.CommittedOffset < r.Size }

// hourCount is how many lines one node and format logged in one hour.
type hourCount struct {
	Node   string    `ch:"node"`
	Format string    `ch:"log_format"`
	Hour   time.Time `ch:"hour"`
	N      uint64    `ch:"n"`
}

// Gap is a stretch of whole hours in which a node's log of one format has
// no line although the log has lines before and after it.
type Gap struct {
	Node   string    `json:"node"`
	Format string    `json:"log_format"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Hours  int       `json:"hours"`
}

// minGapHours is the shortest silence reported as a gap. Low-traffic logs
// are quiet for an hour now and then; two empty hours in a row are shown.
const minGapHours = 2

// minExpectedLines: a silence is a gap only if the log's own average rate
// predicts at least this many lines in it. Event-only logs (Mooncake glog
// writes only on errors) are silent for days by design; the same rule as
// the completeness analyzer keeps them from burying real gaps.
const minExpectedLines = 20

func (s chStore) FindingBuckets(ctx context.Context) ([]FindingBucket, error) {
	runs, err := s.latestRunIDs(ctx)
	if err != nil {
		return nil, err
	}
	var out []FindingBucket
	err = s.c.Select(ctx, &out, `SELECT toStartOfHour(ts) AS hour, analyzer, severity, count() AS n
FROM findings WHERE has(?, run_id) GROUP BY hour, analyzer, severity ORDER BY hour, analyzer, severity`, nonNilStrings(runs))
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

// Gaps finds silent stretches per node and format from hourly line counts.
func (s chStore) Gaps(ctx context.Context) ([]Gap, error) {
	var hc []hourCount
	err := s.c.Select(ctx, &hc, `SELECT node, log_format, toStartOfHour(ts) AS hour, count() AS n
FROM raw_lines GROUP BY node, log_format, hour ORDER BY node, log_format, hour`)
	if err != nil {
		return nil, fmt.Errorf("coverage: %w", err)
	}
	// Lines per hour over each log's span, its "normal" rate.
	type span struct {
		first, last time.Time
		lines       uint64
	}
	spans := map[[2]string]*span{}
	for _, h := range hc {
		k := [2]string{h.Node, h.Format}
		sp := spans[k]
		if sp == nil {
			sp = &span{first: h.Hour}
			spans[k] = sp
		}
		sp.last, sp.lines = h.Hour, sp.lines+h.N
	}
	var gaps []Gap
	for i := 1; i < len(hc); i++ {
		a, b := hc[i-1], hc[i]
		if a.Node != b.Node || a.Format != b.Format {
			continue
		}
		missing := int(b.Hour.Sub(a.Hour)/time.Hour) - 1
		sp := spans[[2]string{a.Node, a.Format}]
		hours := sp.last.Sub(sp.first).Hours() + 1
		if missing >= minGapHours && float64(sp.lines)/hours*float64(missing) >= minExpectedLines {
			gaps = append(gaps, Gap{Node: a.Node, Format: a.Format, From: a.Hour.Add(time.Hour), To: b.Hour, Hours: missing})
		}
	}
	return gaps, nil
}

func (s chStore) HighFindings(ctx context.Context, limit int) ([]Finding, error) {
	runs, err := s.latestRunIDs(ctx)
	if err != nil {
		return nil, err
	}
	var out []Finding
	err = s.c.Select(ctx, &out, "SELECT "+findingCols+" FROM findings WHERE has(?, run_id) AND upper(severity) = 'HIGH' ORDER BY ts DESC, finding_id DESC LIMIT ?",
		nonNilStrings(runs), limit)
	if err != nil {
		return nil, fmt.Errorf("high findings: %w", err)
	}
	return fixFindings(out), nil
}
