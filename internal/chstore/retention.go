package chstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// RetentionTables are the time-partitioned tables of ingested data that
// retention expires. Findings, analyzer runs, cases, held evidence
// (case_evidence, not time-partitioned), exports, the audit log and
// node_boots (a boot stays in force until the next one) are kept.
var RetentionTables = []string{"raw_lines", "id_index", "engine_events", "batch_stats", "transfer_events",
	"gateway_responses", "metric_samples", "page_events", "request_facts"}

// Partition is one time partition of a retention table.
type Partition struct {
	Table    string // logical table name (raw_lines, not raw_lines_local)
	ID       string // partition_id: YYYYMMDD (week's Monday) or YYYYMM
	From, To time.Time
	Rows     uint64
}

// RetentionResult says what ApplyRetention did.
type RetentionResult struct {
	Cutoff time.Time
	// Dropped partitions lay wholly before Cutoff (legacy servers).
	Dropped []Partition
	// Held partitions were expired but overlap a case under legal hold.
	Held []Partition
	// TTL lists the statements that set table TTLs (modern servers): those
	// sent, or on a dry run those that would be.
	TTL []string
	// TTLCurrent lists the tables whose TTL was already the one a statement
	// would set, so none was sent (modern servers).
	TTLCurrent []string
}

// HoldRange is the time span of a case under legal hold: its window and
// the evidence lines copied for it. A zero From or To is unbounded.
type HoldRange struct {
	CaseID   string
	From, To time.Time
}

func (h HoldRange) overlaps(from, to time.Time) bool {
	return (h.To.IsZero() || !h.To.Before(from)) && (h.From.IsZero() || h.From.Before(to))
}

// ApplyRetention expires ingested data older than keep.
//
// ClickHouse 18.16 has no TTL, so on legacy servers kvtrail drops whole
// partitions itself: those that end before now-keep, except any overlapping
// a case under legal hold (held evidence is also copied to case_evidence,
// which is not time-partitioned, but a held window's partitions are kept
// whole anyway). In cluster mode the partitions are listed on every shard
// through cluster() and dropped ON CLUSTER from the local tables.
//
// Modern servers (Version.Modern: 22.1+, which have TTL ... DELETE WHERE)
// get a table TTL instead, so the server expires rows itself between runs. A TTL cannot look
// up cases, so the held windows are written into it as a DELETE WHERE
// exception, and each run re-applies the TTL so that new or released holds
// take effect. A table whose TTL is already the one to set is left alone:
// MODIFY TTL makes the server recompute TTL information for every existing
// part (a mutation), which serve's periodic runs, on several instances,
// would otherwise repeat for nothing. The modern-engine tier
// (internal/chdbtier) runs these statements on ClickHouse 26.7 and checks
// what they expire and that a current TTL is recognised.
func (s *Store) ApplyRetention(ctx context.Context, keep time.Duration, now time.Time, dryRun bool) (*RetentionResult, error) {
	if keep <= 0 {
		return nil, fmt.Errorf("retention: keep must be positive")
	}
	res := &RetentionResult{Cutoff: now.Add(-keep).UTC()}
	holds, err := s.HoldRanges(ctx)
	if err != nil {
		return nil, err
	}
	l := s.Layout()
	onCluster, local := l.onCluster(), l.local
	if s.version.Modern() {
		for i, q := range ttlStatements(l, keep, holds) {
			table := local(RetentionTables[i])
			current, err := TTLCurrent(ctx, s, s.db, table, q)
			if err != nil {
				return res, err
			}
			if current {
				res.TTLCurrent = append(res.TTLCurrent, RetentionTables[i])
				continue
			}
			res.TTL = append(res.TTL, q)
			if dryRun {
				continue
			}
			if err := s.ExecDDL(ctx, q); err != nil {
				return res, fmt.Errorf("retention: set TTL on %s: %w", RetentionTables[i], err)
			}
		}
		return res, nil
	}

	parts, err := s.Partitions(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		if p.To.After(res.Cutoff) {
			continue
		}
		held := false
		for _, h := range holds {
			if h.overlaps(p.From, p.To) {
				held = true
				break
			}
		}
		if held {
			res.Held = append(res.Held, p)
			continue
		}
		if !dryRun {
			q := fmt.Sprintf("ALTER TABLE %s.%s%s DROP PARTITION %s", s.db, local(p.Table), onCluster, partitionLiteral(p.ID))
			if err := s.ExecDDL(ctx, q); err != nil {
				return res, fmt.Errorf("retention: drop %s partition %s: %w", p.Table, p.ID, err)
			}
		}
		res.Dropped = append(res.Dropped, p)
	}
	return res, nil
}

// TTLStatements are the statements ApplyRetention sends to a modern server
// for layout l: each retention table expires rows older than keep, except
// rows in a held span.
func TTLStatements(l Layout, keep time.Duration, holds []HoldRange) []string {
	return ttlStatements(l, keep, holds)
}

// RowQuerier runs a query that returns one row (a *Store; the
// modern-engine tier's in-process store).
type RowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) driver.Row
}

// TTLCurrent reports whether table (in database) already has the TTL that
// the MODIFY TTL statement stmt sets. The server normalises a TTL before
// keeping it in the table's definition (system.tables.engine_full), so the
// statement is normalised by the same server (formatQuerySingleLine) and
// its TTL expression looked up there. On a server without that function
// (older releases) the answer is false, and the TTL is set.
func TTLCurrent(ctx context.Context, db RowQuerier, database, table, stmt string) (bool, error) {
	var formatted string
	if err := db.QueryRow(ctx, "SELECT formatQuerySingleLine(?)", stmt).Scan(&formatted); err != nil {
		return false, nil
	}
	_, expr, ok := strings.Cut(formatted, "MODIFY TTL ")
	if !ok || !strings.HasSuffix(expr, ")") {
		return false, nil
	}
	expr = strings.TrimSuffix(expr, ")")
	var engine string
	err := db.QueryRow(ctx, "SELECT engine_full FROM system.tables WHERE database = ? AND name = ?", database, table).Scan(&engine)
	if err != nil {
		return false, fmt.Errorf("retention: read the TTL of %s: %w", table, err)
	}
	// engine_full is "... ORDER BY ... TTL <expr> SETTINGS ...": compare
	// the whole expression (a prefix match would take a TTL without held
	// spans for one with them).
	_, current, ok := strings.Cut(engine, " TTL ")
	if !ok {
		return false, nil
	}
	current, _, _ = strings.Cut(current, " SETTINGS ")
	return current == expr, nil
}

// ttlStatements set each retention table's TTL to keep, except rows in a
// held span.
func ttlStatements(l Layout, keep time.Duration, holds []HoldRange) []string {
	var except []string
	for _, h := range holds {
		var c []string
		if !h.From.IsZero() {
			c = append(c, fmt.Sprintf("ts >= toDateTime(%d)", h.From.Unix()))
		}
		if !h.To.IsZero() {
			c = append(c, fmt.Sprintf("ts <= toDateTime(%d)", h.To.Unix()))
		}
		if len(c) == 0 {
			c = []string{"1"}
		}
		except = append(except, "("+strings.Join(c, " AND ")+")")
	}
	var out []string
	for _, t := range RetentionTables {
		q := fmt.Sprintf("ALTER TABLE %s.%s%s MODIFY TTL ts + toIntervalSecond(%d)", l.Database, l.local(t), l.onCluster(), int64(keep/time.Second))
		if len(except) > 0 {
			q += " DELETE WHERE NOT (" + strings.Join(except, " OR ") + ")"
		}
		out = append(out, q)
	}
	return out
}

// partitionLiteral is the partition value for ALTER ... DROP PARTITION:
// toMonday partitions are Dates, toYYYYMM ones numbers. (DROP PARTITION ID
// works on 18.16 but not in the modern grammar kvtrail's SQL must parse in.)
func partitionLiteral(id string) string {
	if len(id) == 8 {
		return "'" + id[:4] + "-" + id[4:6] + "-" + id[6:] + "'"
	}
	return id
}

// Partitions lists the active time partitions of the retention tables (on
// every shard in cluster mode), oldest first. A partition's span is its
// calendar week or month widened to the rows it holds.
func (s *Store) Partitions(ctx context.Context) ([]Partition, error) {
	l := s.Layout()
	names := make([]string, len(RetentionTables))
	for i, t := range RetentionTables {
		names[i] = l.local(t)
	}
	q := `SELECT table, partition_id, min(min_time) AS lo, max(max_time) AS hi, sum(rows) AS n
FROM ` + l.system("parts") + `
WHERE database = ? AND active AND has(?, table)
GROUP BY table, partition_id
ORDER BY table, partition_id`
	rows, err := s.Query(ctx, q, s.db, names)
	if err != nil {
		return nil, fmt.Errorf("retention: list partitions: %w", err)
	}
	defer rows.Close()
	var out []Partition
	for rows.Next() {
		var p Partition
		var lo, hi time.Time
		if err := rows.Scan(&p.Table, &p.ID, &lo, &hi, &p.Rows); err != nil {
			return nil, fmt.Errorf("retention: scan partition: %w", err)
		}
		p.Table = strings.TrimSuffix(p.Table, "_local")
		var err error
		switch len(p.ID) {
		case 8: // toMonday(ts)
			p.From, err = time.Parse("20060102", p.ID)
			p.To = p.From.AddDate(0, 0, 7)
		case 6: // toYYYYMM(ts)
			p.From, err = time.Parse("200601", p.ID)
			p.To = p.From.AddDate(0, 1, 0)
		default:
			continue // not a time partition
		}
		if err != nil {
			continue
		}
		if lo.Unix() > 0 && lo.Before(p.From) {
			p.From = lo.UTC()
		}
		if hi.Unix() > 0 && !hi.Before(p.To) {
			p.To = hi.UTC().Add(time.Second)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].From.Before(out[j].From) })
	return out, nil
}

// HoldRanges lists the spans of cases under legal hold (latest version of
// each case): the case window, widened to its held evidence lines.
func (s *Store) HoldRanges(ctx context.Context) ([]HoldRange, error) {
	q := `SELECT case_id, wf, wt FROM (
  SELECT case_id, argMax(legal_hold, version) AS hold, argMax(window_from, version) AS wf, argMax(window_to, version) AS wt
  FROM cases GROUP BY case_id
) WHERE hold = 1 ORDER BY case_id`
	rows, err := s.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("retention: read legal holds: %w", err)
	}
	var out []HoldRange
	idx := map[string]int{}
	for rows.Next() {
		var h HoldRange
		if err := rows.Scan(&h.CaseID, &h.From, &h.To); err != nil {
			rows.Close()
			return nil, fmt.Errorf("retention: scan legal hold: %w", err)
		}
		if h.From.Unix() <= 0 {
			h.From = time.Time{}
		}
		if h.To.Unix() <= 0 {
			h.To = time.Time{}
		}
		idx[h.CaseID] = len(out)
		out = append(out, h)
	}
	rows.Close()
	if len(out) == 0 {
		return nil, rows.Err()
	}
	ev, err := s.Query(ctx, `SELECT case_id, min(ts) AS first_held, max(ts) AS last_held FROM case_evidence GROUP BY case_id`)
	if err != nil {
		return nil, fmt.Errorf("retention: read held evidence: %w", err)
	}
	defer ev.Close()
	for ev.Next() {
		var id string
		var lo, hi time.Time
		if err := ev.Scan(&id, &lo, &hi); err != nil {
			return nil, fmt.Errorf("retention: scan held evidence: %w", err)
		}
		i, ok := idx[id]
		if !ok {
			continue
		}
		h := &out[i]
		if !h.From.IsZero() && lo.Before(h.From) {
			h.From = lo.UTC()
		}
		if !h.To.IsZero() && hi.After(h.To) {
			h.To = hi.UTC()
		}
	}
	return out, ev.Err()
}
