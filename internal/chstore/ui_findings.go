package chstore

import (
	"errors"
	"github.com/kvtrail/kvtrail/domain"
	"sort"
	"strconv"
	"sync"

	"context"
	"fmt"
	"strings"
	"time"
)

func uiNonNilStrings(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

const uiFindingCols = `finding_id, run_id, analyzer, analyzer_version, severity, confidence, ts, first_ts, last_ts,
 request_key, gateway_request_id, tenant, bootstrap_room, prefill_node, decode_node, decode_dp_rank, title,
 explanation, foreign_tenants, evidence_line_ids`

func uiFixFindings(fs []domain.FindingView) []domain.FindingView {
	for i := range fs {
		fs[i].Evidence = uiToU64s(fs[i].EvidenceIDs)
	}
	return fs
}

type uiFindingCursor struct {
	T int64  `json:"t"`
	I string `json:"i"`
}

// currentVersions are the runs whose findings the UI shows, read through
// CurrentFindingsFrom: the rule `kvtrail findings` and the
// notification list use (each analyzer's latest analysis plus what live
// rounds found since, one copy per id), so a finding stored by several
// runs is shown once and a live round does not hide earlier findings.
func (s UIStore) currentVersions(ctx context.Context) ([]string, error) {
	v, err := s.CurrentRunIDs(ctx)
	return uiNonNilStrings(v), err
}

// uiCurrentFindings is the FROM expression of the current findings.
const uiCurrentFindings = CurrentFindingsFrom

// uiFindingWhere narrows findings to q: the table expression to read (the
// current findings, or with q.RunID the findings of that one run) and the
// conditions, with their arguments in order.
func uiFindingWhere(q domain.FindingQuery, versions []string) (from, where string, args []any) {
	w := []string{"1"}
	from = "findings"
	if q.RunID == "" {
		from = uiCurrentFindings
		args = append(args, uiNonNilStrings(versions))
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
		add("ts >= ?", uiUTC(q.From))
	}
	if !q.To.IsZero() {
		add("ts <= ?", uiUTC(q.To))
	}
	return from, strings.Join(w, " AND "), args
}

// ListFindings pages with a keyset on (ts, finding_id), newest first.
func (s UIStore) ListFindings(ctx context.Context, q domain.FindingQuery) (domain.FindingPage, error) {
	page := domain.FindingPage{Query: q}
	versions, err := s.currentVersions(ctx)
	if err != nil {
		return page, err
	}
	from, where, args := uiFindingWhere(q, versions)
	if err := s.Store.QueryRow(ctx, "SELECT count() FROM "+from+" WHERE "+where, args...).Scan(&page.Total); err != nil {
		return page, fmt.Errorf("count findings: %w", err)
	}
	if q.Cursor != "" {
		var cur uiFindingCursor
		if err := uiDecodeCursor(q.Cursor, &cur); err != nil {
			return page, err
		}
		t := time.Unix(cur.T, 0).UTC()
		where += " AND (ts < ? OR (ts = ? AND finding_id < ?))"
		args = append(args, t, t, cur.I)
	}
	sql := "SELECT " + uiFindingCols + " FROM " + from + " WHERE " + where + " ORDER BY ts DESC, finding_id DESC LIMIT ?"
	if err := s.Store.Select(ctx, &page.Findings, sql, append(args, q.Limit+1)...); err != nil {
		return page, fmt.Errorf("list findings: %w", err)
	}
	if len(page.Findings) > q.Limit {
		page.Findings = page.Findings[:q.Limit]
		last := page.Findings[len(page.Findings)-1]
		page.Next = uiEncodeCursor(uiFindingCursor{T: last.TS.Unix(), I: last.FindingID})
	}
	uiFixFindings(page.Findings)
	if err := s.fillForeignFromReconstruction(ctx, page.Findings); err != nil {
		return page, err
	}
	var names []struct {
		A string `ch:"a"`
	}
	if err := s.Store.Select(ctx, &names, "SELECT DISTINCT analyzer AS a FROM analyzer_runs ORDER BY a"); err != nil {
		return page, fmt.Errorf("analyzers: %w", err)
	}
	for _, n := range names {
		page.Analyzers = append(page.Analyzers, n.A)
	}
	return page, nil
}

// uiFillForeign sets a finding's foreign tenants from the reconstruction
// where the analyzer left them empty.
func uiFillForeign(fs []domain.FindingView, sources []domain.SourceTenant) {
	for i := range fs {
		if len(fs[i].ForeignTenants) > 0 {
			continue
		}
		for _, s := range sources {
			if s.Tenant != fs[i].Tenant && !uiContains(fs[i].ForeignTenants, s.Tenant) {
				fs[i].ForeignTenants = append(fs[i].ForeignTenants, s.Tenant)
			}
		}
	}
}

// Finding reads one finding (its newest copy) with its evidence lines and
// the tenants on the other side: finding_keys gives its analyzer and time,
// which make the read of findings a primary-key one.
func (s UIStore) Finding(ctx context.Context, id string) (*domain.FindingDetail, error) {
	fs, err := s.findingsByKeys(ctx, []string{"f:" + id}, nil)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		// Not in finding_keys (written since migration 0008): the
		// finding, if it exists, is found by a scan of findings.
		// The same finding is stored once per run; the newest copy is shown.
		if err := s.Store.Select(ctx, &fs, "SELECT "+uiFindingCols+" FROM findings WHERE finding_id = ? ORDER BY created_at DESC, run_id DESC LIMIT 1", id); err != nil {
			return nil, fmt.Errorf("finding: %w", err)
		}
	}
	if len(fs) == 0 {
		return nil, uiNotFound
	}
	uiFixFindings(fs)
	d := &domain.FindingDetail{Finding: fs[0]}
	// Evidence sits around the finding's own times (boot lines are found
	// through node_boots by Lines).
	f := fs[0]
	near := []domain.LineSpan{{From: f.TS.Add(-uiLineSlack), To: f.TS.Add(uiLineSlack)}, {From: f.FirstTS.Add(-uiLineSlack), To: f.FirstTS.Add(uiLineSlack)},
		{From: f.LastTS.Add(-uiLineSlack), To: f.LastTS.Add(uiLineSlack)}}
	key := f.GatewayRequestID
	if key == "" {
		key = f.RequestKey
	}
	// The evidence lines and the other side are independent reads.
	var wg sync.WaitGroup
	var srcErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.Sources, d.OwnDataOnly, srcErr = s.sourcesFor(ctx, key, f.Tenant, []string{f.FindingID})
	}()
	d.Lines, err = s.linesOn(ctx, f.EvidenceIDs, []string{f.PrefillNode, f.DecodeNode}, near...)
	wg.Wait()
	if err = errors.Join(err, srcErr); err != nil {
		return nil, err
	}
	one := []domain.FindingView{d.Finding}
	uiFillForeign(one, d.Sources)
	d.Finding = one[0]
	return d, nil
}

// findingsFor lists the current findings on one request: those naming its
// gateway request id (as their own or as a foreign request) or its room,
// found through finding_keys.
func (s UIStore) findingsFor(ctx context.Context, r domain.RequestRow) ([]domain.FindingView, error) {
	versions, err := s.currentVersions(ctx)
	if err != nil {
		return nil, err
	}
	keys := []string{"r:" + r.RequestID}
	if r.Room != 0 {
		keys = append(keys, "b:"+strconv.FormatUint(r.Room, 10))
	}
	fs, err := s.findingsByKeys(ctx, keys, versions)
	if err != nil {
		return nil, fmt.Errorf("findings for request: %w", err)
	}
	sort.Slice(fs, func(i, j int) bool {
		if !fs[i].TS.Equal(fs[j].TS) {
			return fs[i].TS.Before(fs[j].TS)
		}
		return fs[i].FindingID < fs[j].FindingID
	})
	return uiFixFindings(fs), nil
}

// uiFindingKeyLimit bounds the findings one page reads by key.
const uiFindingKeyLimit = 500

// findingsByKeys reads the findings finding_keys lists under keys, newest
// copy of each; with runIDs, only copies those runs stored (the current
// findings' rule). Both reads are by primary key: finding_keys by key, then
// findings by (analyzer, ts range, finding_id).
func (s UIStore) findingsByKeys(ctx context.Context, keys, runIDs []string) ([]domain.FindingView, error) {
	var refs []struct {
		ID       string    `ch:"finding_id"`
		Analyzer string    `ch:"analyzer"`
		From     time.Time `ch:"lo"`
		To       time.Time `ch:"hi"`
	}
	// Literal IN lists: ClickHouse uses the primary key for them.
	args := make([]any, 0, len(keys)+2)
	for _, k := range keys {
		args = append(args, k)
	}
	cond := ""
	if runIDs != nil {
		cond, args = " AND has(?, run_id)", append(args, runIDs)
	}
	args = append(args, uiFindingKeyLimit)
	if err := s.Store.Select(ctx, &refs, `SELECT finding_id, any(analyzer) AS analyzer, min(ts) AS lo, max(ts) AS hi FROM finding_keys
WHERE key IN (`+uiPlaceholders(len(keys))+`)`+cond+` GROUP BY finding_id ORDER BY finding_id LIMIT ?`, args...); err != nil {
		return nil, fmt.Errorf("finding keys: %w", err)
	}
	if len(refs) == 0 {
		return nil, nil
	}
	var ids, analyzers []any
	seen := map[string]bool{}
	from, to := refs[0].From, refs[0].To
	for _, r := range refs {
		ids = append(ids, r.ID)
		if !seen[r.Analyzer] {
			seen[r.Analyzer] = true
			analyzers = append(analyzers, r.Analyzer)
		}
		from, to = uiMinTime(from, r.From), uiMaxTime(to, r.To)
	}
	// The range is widened by a second for DateTime's truncation.
	// PREWHERE on the id: only the granules holding these findings have
	// their explanations and arrays read.
	q := "SELECT " + uiFindingCols + ` FROM findings
PREWHERE finding_id IN (` + uiPlaceholders(len(ids)) + `)
WHERE analyzer IN (` + uiPlaceholders(len(analyzers)) + `) AND ts >= ? AND ts <= ?`
	args = append(append(ids, analyzers...), uiUTC(from), uiUTC(to).Add(time.Second))
	if runIDs != nil {
		q, args = q+" AND has(?, run_id)", append(args, runIDs)
	}
	var fs []domain.FindingView
	if err := s.Store.Select(ctx, &fs, q+" ORDER BY finding_id, created_at DESC, run_id DESC LIMIT 1 BY finding_id", args...); err != nil {
		return nil, fmt.Errorf("findings by key: %w", err)
	}
	return fs, nil
}
