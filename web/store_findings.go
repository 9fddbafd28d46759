package web

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"
)

func nonNilStrings(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// Finding is one analyzer conclusion with the lines that prove it.
type Finding struct {
	FindingID        string    `ch:"finding_id" json:"finding_id"`
	RunID            string    `ch:"run_id" json:"run_id"`
	Analyzer         string    `ch:"analyzer" json:"analyzer"`
	AnalyzerVersion  string    `ch:"analyzer_version" json:"analyzer_version"`
	Severity         string    `ch:"severity" json:"severity"`
	Confidence       float64   `ch:"confidence" json:"confidence"`
	TS               time.Time `ch:"ts" json:"ts"`
	FirstTS          time.Time `ch:"first_ts" json:"first_ts"`
	LastTS           time.Time `ch:"last_ts" json:"last_ts"`
	RequestKey       string    `ch:"request_key" json:"request_key"`
	GatewayRequestID string    `ch:"gateway_request_id" json:"gateway_request_id"`
	Tenant           string    `ch:"tenant" json:"tenant"`
	Room             uint64    `ch:"bootstrap_room" json:"bootstrap_room,string"`
	PrefillNode      string    `ch:"prefill_node" json:"prefill_node"`
	DecodeNode       string    `ch:"decode_node" json:"decode_node"`
	DecodeDPRank     int16     `ch:"decode_dp_rank" json:"decode_dp_rank"`
	Title            string    `ch:"title" json:"title"`
	Explanation      string    `ch:"explanation" json:"explanation"`
	ForeignTenants   []string  `ch:"foreign_tenants" json:"foreign_tenants"`
	EvidenceIDs      []uint64  `ch:"evidence_line_ids" json:"-"`
	Evidence         []U64     `json:"evidence_line_ids"`
}

const findingCols = `finding_id, run_id, analyzer, analyzer_version, severity, confidence, ts, first_ts, last_ts,
 request_key, gateway_request_id, tenant, bootstrap_room, prefill_node, decode_node, decode_dp_rank, title,
 explanation, foreign_tenants, evidence_line_ids`

func fixFindings(fs []Finding) []Finding {
	for i := range fs {
		fs[i].Evidence = toU64s(fs[i].EvidenceIDs)
	}
	return fs
}

// FindingQuery filters the findings page.
type FindingQuery struct {
	Analyzer      string    `json:"analyzer,omitempty"`
	Severity      string    `json:"severity,omitempty"`
	MinConfidence float64   `json:"min_confidence,omitempty"`
	RunID         string    `json:"run_id,omitempty"`
	Tenant        string    `json:"tenant,omitempty"`
	From          time.Time `json:"from"`
	To            time.Time `json:"to"`
	Limit         int       `json:"limit"`
	Cursor        string    `json:"cursor,omitempty"`
}

// FindingPage is one page of findings, newest first, and the total.
type FindingPage struct {
	Query     FindingQuery `json:"query"`
	Findings  []Finding    `json:"findings"`
	Total     uint64       `json:"total"`
	Next      string       `json:"next,omitempty"`
	Analyzers []string     `json:"analyzers"`
}

type findingCursor struct {
	T int64  `json:"t"`
	I string `json:"i"`
}

// currentVersions are the runs whose findings the UI shows, read through
// chstore.CurrentFindingsFrom: the rule `kvtrail findings` and the
// notification list use (each analyzer's latest analysis plus what live
// rounds found since, one copy per id), so a finding stored by several
// runs is shown once and a live round does not hide earlier findings.
func (s chStore) currentVersions(ctx context.Context) ([]string, error) {
	r, err := s.current()
	if err != nil {
		return nil, err
	}
	v, err := r.CurrentRunIDs(ctx)
	return nonNilStrings(v), err
}

// currentReader reads the one current-findings rule and the one gap rule
// (*chstore.Store has it).
type currentReader interface {
	CurrentRunIDs(ctx context.Context) ([]string, error)
	Silences(ctx context.Context, from, to time.Time, threshold time.Duration) ([]domain.Silence, error)
}

func (s chStore) current() (currentReader, error) {
	r, ok := s.c.(currentReader)
	if !ok {
		return nil, fmt.Errorf("store %T does not read current findings", s.c)
	}
	return r, nil
}

// currentFindings is the FROM expression of the current findings.
const currentFindings = chstore.CurrentFindingsFrom

// findingWhere narrows findings to q: the table expression to read (the
// current findings, or with q.RunID the findings of that one run) and the
// conditions, with their arguments in order.
func findingWhere(q FindingQuery, versions []string) (from, where string, args []any) {
	w := []string{"1"}
	from = "findings"
	if q.RunID == "" {
		from = currentFindings
		args = append(args, nonNilStrings(versions))
	}
	add := func(cond string, a ...any) { w = append(w, cond); args = append(args, a...) }
	if q.Analyzer != "" {
		add("analyzer = ?", q.Analyzer)
	}
	if q.Severity != "" {
		add("upper(severity) = ?", strings.ToUpper(q.Severity))
	}
	if q.MinConfidence > 0 {
		add("confidence >= ?", q.MinConfidence)
	}
	if q.RunID != "" {
		add("run_id = ?", q.RunID)
	}
	if q.Tenant != "" {
		add("(tenant = ? OR has(foreign_tenants, ?))", q.Tenant, q.Tenant)
	}
	if !q.From.IsZero() {
		add("ts >= ?", utc(q.From))
	}
	if !q.To.IsZero() {
		add("ts <= ?", utc(q.To))
	}
	return from, strings.Join(w, " AND "), args
}

// ListFindings pages with a keyset on (ts, finding_id), newest first.
func (s chStore) ListFindings(ctx context.Context, q FindingQuery) (FindingPage, error) {
	page := FindingPage{Query: q}
	versions, err := s.currentVersions(ctx)
	if err != nil {
		return page, err
	}
	from, where, args := findingWhere(q, versions)
	if err := s.c.QueryRow(ctx, "SELECT count() FROM "+from+" WHERE "+where, args...).Scan(&page.Total); err != nil {
		return page, fmt.Errorf("count findings: %w", err)
	}
	if q.Cursor != "" {
		var cur findingCursor
		if err := decodeCursor(q.Cursor, &cur); err != nil {
			return page, err
		}
		t := time.Unix(cur.T, 0).UTC()
		where += " AND (ts < ? OR (ts = ? AND finding_id < ?))"
		args = append(args, t, t, cur.I)
	}
	sql := "SELECT " + findingCols + " FROM " + from + " WHERE " + where + " ORDER BY ts DESC, finding_id DESC LIMIT ?"
	if err := s.c.Select(ctx, &page.Findings, sql, append(args, q.Limit+1)...); err != nil {
		return page, fmt.Errorf("list findings: %w", err)
	}
	if len(page.Findings) > q.Limit {
		page.Findings = page.Findings[:q.Limit]
		last := page.Findings[len(page.Findings)-1]
		page.Next = encodeCursor(findingCursor{T: last.TS.Unix(), I: last.FindingID})
	}
	fixFindings(page.Findings)
	if err := s.fillForeignFromReconstruction(ctx, page.Findings); err != nil {
		return page, err
	}
	var names []struct {
		A string `ch:"a"`
	}
	if err := s.c.Select(ctx, &names, "SELECT DISTINCT analyzer AS a FROM analyzer_runs ORDER BY a"); err != nil {
		return page, fmt.Errorf("analyzers: %w", err)
	}
	for _, n := range names {
		page.Analyzers = append(page.Analyzers, n.A)
	}
	return page, nil
}

// FindingDetail is one finding with its evidence lines.
type FindingDetail struct {
	Finding Finding   `json:"finding"`
	Lines   []RawLine `json:"evidence_lines"`
	// Sources and OwnDataOnly: see Timeline.
	Sources     []Source `json:"sources"`
	OwnDataOnly bool     `json:"own_data_only"`
}

// fillForeign sets a finding's foreign tenants from the reconstruction
// where the analyzer left them empty.
func fillForeign(fs []Finding, sources []Source) {
	for i := range fs {
		if len(fs[i].ForeignTenants) > 0 {
			continue
		}
		for _, s := range sources {
			if s.Tenant != fs[i].Tenant && !contains(fs[i].ForeignTenants, s.Tenant) {
				fs[i].ForeignTenants = append(fs[i].ForeignTenants, s.Tenant)
			}
		}
	}
}

func (s chStore) Finding(ctx context.Context, id string) (*FindingDetail, error) {
	var fs []Finding
	// The same finding is stored once per run; the newest copy is shown.
	if err := s.c.Select(ctx, &fs, "SELECT "+findingCols+" FROM findings WHERE finding_id = ? ORDER BY created_at DESC, run_id DESC LIMIT 1", id); err != nil {
		return nil, fmt.Errorf("finding: %w", err)
	}
	if len(fs) == 0 {
		return nil, errNotFound
	}
	fixFindings(fs)
	d := &FindingDetail{Finding: fs[0]}
	var err error
	// Evidence sits around the finding's own times (boot lines are found
	// through node_boots by Lines).
	f := fs[0]
	near := []span{{From: f.TS.Add(-lineSlack), To: f.TS.Add(lineSlack)}, {From: f.FirstTS.Add(-lineSlack), To: f.FirstTS.Add(lineSlack)},
		{From: f.LastTS.Add(-lineSlack), To: f.LastTS.Add(lineSlack)}}
	if d.Lines, err = s.linesOn(ctx, f.EvidenceIDs, []string{f.PrefillNode, f.DecodeNode}, near...); err != nil {
		return nil, err
	}
	key := f.GatewayRequestID
	if key == "" {
		key = f.RequestKey
	}
	if d.Sources, d.OwnDataOnly, err = s.sourcesFor(ctx, key, f.Tenant, []string{f.FindingID}); err != nil {
		return nil, err
	}
	one := []Finding{d.Finding}
	fillForeign(one, d.Sources)
	d.Finding = one[0]
	return d, nil
}

// findingsFor lists the findings on one request.
func (s chStore) findingsFor(ctx context.Context, r RequestRow) ([]Finding, error) {
	versions, err := s.currentVersions(ctx)
	if err != nil {
		return nil, err
	}
	var fs []Finding
	err = s.c.Select(ctx, &fs, "SELECT "+findingCols+` FROM `+currentFindings+`
WHERE (gateway_request_id = ? OR (bootstrap_room = ? AND bootstrap_room != 0) OR has(foreign_request_keys, ?))
ORDER BY ts, finding_id LIMIT 500`, versions, r.RequestID, r.Room, r.RequestID)
	if err != nil {
		return nil, fmt.Errorf("findings for request: %w", err)
	}
	return fixFindings(fs), nil
}
