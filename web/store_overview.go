package web

import (
	"context"
	"fmt"
	"sort"
	"sync"
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

// Gap rule, ported exactly from analyze/completeness.go (findGaps), so the
// overview and the completeness analyzer report the same gaps:
//   - lines are counted per node and minute by distinct line_id;
//   - a silence longer than gapThreshold (analyze's default GapThreshold)
//     between two minutes with lines is a gap only if the node's own average
//     rate predicts at least minExpectedLines lines in it, and
//   - some other node logged inside it.
//
// Lines without a time of their own (Prometheus text without timestamps,
// stored at the Unix epoch) are left out: they are not a node's log and
// made "1970 → 2026" gaps.
const (
	gapThreshold     = 10 * time.Minute
	minExpectedLines = 20
)

// gapFloor excludes epoch-stamped lines from the gap count.
var gapFloor = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

type minuteCount struct {
	Node   string    `ch:"node"`
	Minute time.Time `ch:"bucket"`
	N      uint64    `ch:"n"`
}

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
	var mc []minuteCount
	err := s.c.Select(ctx, &mc, `SELECT node, toStartOfMinute(ts) AS bucket, uniqExact(line_id) AS n
FROM raw_lines WHERE ts >= ? GROUP BY node, bucket ORDER BY node, bucket`, gapFloor)
	if err != nil {
		return nil, fmt.Errorf("line counts per node: %w", err)
	}
	gaps := findGaps(mc)
	gc.version, gc.gaps = version, gaps
	return gaps, nil
}

// findGaps applies the rule above to per-node minute counts sorted by
// node and minute.
func findGaps(mc []minuteCount) []Gap {
	per := map[string][]time.Time{}
	total := map[string]uint64{}
	fleet := map[int64]int{}
	var nodes []string
	for _, m := range mc {
		if _, ok := per[m.Node]; !ok {
			nodes = append(nodes, m.Node)
		}
		per[m.Node] = append(per[m.Node], m.Minute.UTC())
		fleet[m.Minute.Unix()]++
		total[m.Node] += m.N
	}
	sort.Strings(nodes)
	var gaps []Gap
	for _, n := range nodes {
		ms := per[n]
		for i := 1; i < len(ms); i++ {
			if ms[i].Sub(ms[i-1]) <= gapThreshold {
				continue
			}
			span := ms[len(ms)-1].Sub(ms[0]).Minutes() + 1
			rate := float64(total[n]) / span
			if rate*ms[i].Sub(ms[i-1]).Minutes() < minExpectedLines {
				continue
			}
			others := false
			for t := ms[i-1].Add(time.Minute); t.Before(ms[i]); t = t.Add(time.Minute) {
				if fleet[t.Unix()] > 0 {
					others = true
					break
				}
			}
			if others {
				from := ms[i-1].Add(time.Minute)
				gaps = append(gaps, Gap{Node: n, From: from, To: ms[i], Minutes: int(ms[i].Sub(from) / time.Minute)})
			}
		}
	}
	return gaps
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
