package chstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/ch-go/proto"

	"github.com/kvtrail/kvtrail/domain"
)

// This file is the read side of analysis results that every consumer
// shares: the recorded runs, the current findings (domain.CurrentRunIDs is
// the rule, CurrentFindingsFrom its table expression) and the per-minute
// line counts behind the one gap rule (domain.FindSilences).

const runsSQL = `SELECT run_id, analyzer, version, params, window_from, window_to, watermark, started_at, finished_at,
 status, findings, high, error, trigger, case_id
FROM analyzer_runs
ORDER BY started_at, run_id`

// Runs returns every recorded analyzer run, oldest first.
func (s *Store) Runs(ctx context.Context) ([]domain.Run, error) {
	rows, err := s.Query(ctx, runsSQL)
	if err != nil {
		return nil, fmt.Errorf("read analyzer runs: %w", err)
	}
	defer rows.Close()
	var out []domain.Run
	for rows.Next() {
		var r domain.Run
		var n, h uint32
		if err := rows.Scan(&r.ID, &r.Analyzer, &r.Version, &r.Params, &r.Window.From, &r.Window.To, &r.Watermark,
			&r.Started, &r.Finished, &r.Status, &n, &h, &r.Error, &r.Trigger, &r.CaseID); err != nil {
			return nil, fmt.Errorf("scan analyzer run: %w", err)
		}
		r.Findings, r.High = int(n), int(h)
		out = append(out, r)
	}
	return out, rows.Err()
}

// CurrentRunIDs lists the runs whose findings are current (domain's rule):
// the parameter of CurrentFindingsFrom.
func (s *Store) CurrentRunIDs(ctx context.Context) ([]string, error) {
	runs, err := s.Runs(ctx)
	if err != nil {
		return nil, err
	}
	return domain.CurrentRunIDs(runs), nil
}

// CurrentFindingsFrom is the current findings as a table expression; its
// one parameter is CurrentRunIDs. Every reader — the CLI, the
// reconstruction, the UI and the API — reads findings through it, so they
// count the same findings: of a finding stored twice, the latest copy.
const CurrentFindingsFrom = `(SELECT * FROM findings WHERE has(?, run_id)
 ORDER BY finding_id, created_at DESC, run_id DESC LIMIT 1 BY finding_id)`

const findingColumns = `finding_id, run_id, analyzer, analyzer_version, severity, confidence, ts, first_ts,
 last_ts, request_key, gateway_request_id, tenant, bootstrap_room, prefill_node, decode_node, decode_dp_rank, rids,
 title, explanation, group_key, foreign_tenants, foreign_request_keys, evidence_line_ids, detail_keys, detail_values`

const currentFindingsSQL = `SELECT ` + findingColumns + `
FROM ` + CurrentFindingsFrom

const findingsOfRunsSQL = `SELECT ` + findingColumns + `
FROM findings
WHERE has(?, run_id)
ORDER BY analyzer, ts, finding_id`

// LatestFindings returns the current findings, sorted by analyzer, time
// and id: the one set the CLI, the UI, the API and the notification list
// all read.
func (s *Store) LatestFindings(ctx context.Context) ([]domain.Finding, error) {
	return s.LatestFindingsWhere(ctx, nil, nil)
}

// currentFindingsAtLeastSQL is currentFindingsSQL narrowed by a severity
// floor (its predicate in %s). The floor is judged on each finding's
// current copy, found over the light columns; only those findings' rows
// are read whole and sorted again. GLOBAL IN: on a cluster both reads are
// of the Distributed table.
const currentFindingsAtLeastSQL = `SELECT ` + findingColumns + `
FROM (SELECT * FROM findings WHERE has(?, run_id) AND finding_id GLOBAL IN (
  SELECT finding_id FROM (SELECT finding_id, analyzer, severity FROM findings WHERE has(?, run_id)
   ORDER BY finding_id, created_at DESC, run_id DESC LIMIT 1 BY finding_id)
  WHERE %s)
 ORDER BY finding_id, created_at DESC, run_id DESC LIMIT 1 BY finding_id)`

// LatestFindingsWhere is LatestFindings keeping only the findings whose
// current copy passes floor (nil keeps all), decided by the server, and
// then only those keep accepts (nil keeps all), decided as they stream in.
// At 10M requests the current findings are half a million abort_reuse
// leads, of which the notification list reads only the victims: sending
// them all took the server 20 s and 1.3 GB to sort.
func (s *Store) LatestFindingsWhere(ctx context.Context, floor domain.SeverityFloor, keep func(*domain.Finding) bool) ([]domain.Finding, error) {
	runIDs, err := s.CurrentRunIDs(ctx)
	if err != nil || len(runIDs) == 0 {
		return nil, err
	}
	query, args := currentFindingsSQL, []any{runIDs}
	if floor != nil {
		pred, pargs := floorPredicate(floor)
		query = fmt.Sprintf(currentFindingsAtLeastSQL, pred)
		args = append([]any{runIDs, runIDs}, pargs...)
	}
	fs, err := s.scanFindings(ctx, query, keep, args...)
	if err != nil {
		return nil, err
	}
	domain.SortFindings(fs)
	return fs, nil
}

// floorPredicate is floor as a WHERE predicate over analyzer and severity,
// analyzers in name order so the statement is the same every run; an
// empty floor keeps nothing.
func floorPredicate(floor domain.SeverityFloor) (string, []any) {
	names := make([]string, 0, len(floor))
	for name := range floor {
		names = append(names, name)
	}
	slices.Sort(names)
	var terms []string
	var args []any
	for _, name := range names {
		var sevs []string
		for _, sev := range domain.Severities {
			if sev.AtLeast(floor[name]) {
				sevs = append(sevs, string(sev))
			}
		}
		terms = append(terms, "(analyzer = ? AND has(?, severity))")
		args = append(args, name, sevs)
	}
	if len(terms) == 0 {
		return "0", nil
	}
	return strings.Join(terms, " OR "), args
}

// FindingsOfRuns reads the findings the given runs recorded.
func (s *Store) FindingsOfRuns(ctx context.Context, runIDs []string) ([]domain.Finding, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	return s.scanFindings(ctx, findingsOfRunsSQL, nil, runIDs)
}

func (s *Store) scanFindings(ctx context.Context, query string, keep func(*domain.Finding) bool, args ...any) ([]domain.Finding, error) {
	// A stream: at 10M requests the current findings took the server more
	// than the 60 s read timeout to sort and send.
	rows, done, err := s.Stream(ctx, query, args...)
	defer done()
	if err != nil {
		return nil, fmt.Errorf("read findings: %w", err)
	}
	defer rows.Close()
	var out []domain.Finding
	for rows.Next() {
		var f domain.Finding
		var sev string
		var keys, vals []string
		if err := rows.Scan(&f.ID, &f.RunID, &f.Analyzer, &f.AnalyzerVersion, &sev, &f.Confidence, &f.TS, &f.FirstTS,
			&f.LastTS, &f.RequestKey, &f.GatewayRequestID, &f.Tenant, &f.Room, &f.PrefillNode, &f.DecodeNode,
			&f.DecodeDPRank, &f.RIDs, &f.Title, &f.Explanation, &f.GroupKey, &f.ForeignTenants, &f.ForeignRequestKeys,
			&f.Evidence, &keys, &vals); err != nil {
			return nil, fmt.Errorf("scan finding: %w", err)
		}
		f.Severity = domain.Severity(sev)
		f.TS, f.FirstTS, f.LastTS = f.TS.UTC(), f.FirstTS.UTC(), f.LastTS.UTC()
		f.Details = make(map[string]string, len(keys))
		for i, k := range keys {
			if i < len(vals) {
				f.Details[k] = vals[i]
			}
		}
		if keep == nil || keep(&f) {
			out = append(out, f)
		}
	}
	return out, rows.Err()
}

// Lines are counted by distinct line_id: rows written twice (overlapping
// ingests, a retried window) before ClickHouse merges them away must not
// raise a node's rate and turn its idle minutes into gaps. The statement
// groups by one number, the node's place in the window's node list
// (transform) and the minute: grouping by the node's name and the minute
// took 0.6-0.9 s of server time for the 2.4M lines of incident scale 2 on
// 18.16, which serializes a key of a string and a number per row, and
// 0.50-0.94 s of server CPU for one day of scale 100 (6.45M lines)
// against 0.29-0.45 with the number. One statement for every node, not
// one a node: a fleet of hundreds of nodes would otherwise cost hundreds
// of statements.
const (
	minuteCountsWhere = `
WHERE ts >= toDateTime(?) AND ts < toDateTime(?)`
	// The nodes that logged lines in the window.
	minuteNodesSQL = `SELECT groupUniqArray(toString(node)) FROM raw_lines` + minuteCountsWhere
	// The arguments: the nodes twice (names, then their places 1..n),
	// from, to. A node that logged its first line after the list was read
	// is place 0, left out as if read after it.
	minuteCountsSQL = `SELECT transform(toString(node), ?, arrayEnumerate(?), toUInt32(0)) * 4294967296 + toUInt32(toStartOfMinute(ts)) AS node_minute,
 min(line_id) AS first_line, uniqExact(line_id) AS lines
FROM raw_lines` + minuteCountsWhere + `
GROUP BY node_minute`
	// The lines per minute (any node, duplicates counted) that cut the
	// window into the statements above.
	minuteLinesSQL = bucketsFrom + `raw_lines` + minuteCountsWhere + bucketsBy
)

// minuteLinesPerQuery bounds the lines one minute-count statement reads.
// uniqExact holds every distinct line_id of each (node, minute) until the
// statement ends, about 25 bytes a line on the server: the whole window in
// one statement took 2.0 GB of server memory at incident scale 100 (80M
// lines) on 18.16, 3.4 times scale 20's for 4.6 times the lines: at that
// growth a window ten times as large would take about 13 GB, past the
// server's default 10 GB per-query limit, and the analysis would fail.
// The window is cut at minute starts by a count of its lines per minute,
// so no minute is split and the statements' rows together are the
// window's.
var minuteLinesPerQuery = 8_000_000

// NodeMinutes counts each node's distinct lines per minute in [from, to),
// unordered. Read as blocks: a node-minute per row is a quarter million
// rows for 13 nodes over 13 days, whatever the scale, which scanned row by
// row through the driver cost more than the gap rule itself.
func (s *Store) NodeMinutes(ctx context.Context, from, to time.Time) ([]domain.NodeMinute, error) {
	var nodes []string
	if err := s.QueryRow(ctx, minuteNodesSQL, UnixArg(from), UnixArg(to)).Scan(&nodes); err != nil {
		return nil, fmt.Errorf("nodes with lines: %w", err)
	}
	if len(nodes) == 0 {
		return nil, nil
	}
	slices.Sort(nodes)
	spans, err := s.cutByMinute(ctx, minuteLinesSQL, from, to, minuteLinesPerQuery)
	if err != nil {
		return nil, fmt.Errorf("line counts per node: %w", err)
	}
	var (
		nodeMinute, firstLine, nLines proto.ColUInt64
		out                           []domain.NodeMinute
	)
	cols := proto.Results{{Name: "node_minute", Data: &nodeMinute}, {Name: "first_line", Data: &firstLine},
		{Name: "lines", Data: &nLines}}
	for _, w := range spans {
		err := s.scanBlocks(ctx, minuteCountsSQL, []any{nodes, nodes, UnixArg(w.From), UnixArg(w.To)}, cols, func(n int) error {
			out = slices.Grow(out, n)
			for i := range n {
				at := nodeMinute[i] >> 32
				if at == 0 || at > uint64(len(nodes)) {
					continue
				}
				out = append(out, domain.NodeMinute{Node: nodes[at-1], Minute: time.Unix(int64(uint32(nodeMinute[i])), 0).UTC(),
					FirstLine: firstLine[i], Lines: nLines[i]})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("line counts per node, %s: %w", w, err)
		}
	}
	return out, nil
}

// Silences applies the one gap rule to [from, to).
func (s *Store) Silences(ctx context.Context, from, to time.Time, threshold time.Duration) ([]domain.Silence, error) {
	if threshold <= 0 {
		return nil, nil
	}
	counts, err := s.NodeMinutes(ctx, from, to)
	if err != nil {
		return nil, err
	}
	return domain.FindSilences(counts, threshold), nil
}

// UnixArg is a time as the UInt32 that toDateTime(?) takes: the zero time
// and times before 1970 are 0 (DateTime's floor on every server).
func UnixArg(t time.Time) uint32 {
	if t.IsZero() || t.Unix() < 0 {
		return 0
	}
	return uint32(t.Unix())
}
