package chstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

type uiCaseRow struct {
	ID        string    `ch:"case_id"`
	Name      string    `ch:"name"`
	From      time.Time `ch:"window_from"`
	To        time.Time `ch:"window_to"`
	Filters   string    `ch:"filters"`
	Notes     string    `ch:"notes"`
	Status    string    `ch:"status"`
	LegalHold uint8     `ch:"legal_hold"`
	CreatedBy string    `ch:"created_by"`
	CreatedAt time.Time `ch:"created_at"`
	UpdatedAt time.Time `ch:"updated_at"`
	Version   uint64    `ch:"version"`
}

func (r uiCaseRow) toCase() domain.Case {
	c := domain.Case{ID: r.ID, Name: r.Name, From: r.From, To: r.To, Notes: r.Notes, Status: r.Status, LegalHold: r.LegalHold == 1,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Version: r.Version}
	_ = json.Unmarshal([]byte(r.Filters), &c.Filters)
	return c
}

const uiCaseCols = `case_id, name, window_from, window_to, filters, notes, status, legal_hold, created_by, created_at, updated_at, version`

func (s UIStore) ListCases(ctx context.Context) ([]domain.Case, error) {
	var rows []uiCaseRow
	if err := s.Store.Select(ctx, &rows, "SELECT "+uiCaseCols+" FROM cases FINAL ORDER BY updated_at DESC, case_id LIMIT 10000"); err != nil {
		return nil, fmt.Errorf("list cases: %w", err)
	}
	out := make([]domain.Case, len(rows))
	for i, r := range rows {
		out[i] = r.toCase()
	}
	return out, nil
}

func (s UIStore) GetCase(ctx context.Context, id string) (domain.Case, error) {
	var rows []uiCaseRow
	if err := s.Store.Select(ctx, &rows, "SELECT "+uiCaseCols+" FROM cases FINAL WHERE case_id = ? LIMIT 1", id); err != nil {
		return domain.Case{}, fmt.Errorf("get case: %w", err)
	}
	if len(rows) == 0 {
		return domain.Case{}, uiNotFound
	}
	return rows[0].toCase(), nil
}

// SaveCase writes a new version of the case.
func (s UIStore) SaveCase(ctx context.Context, c domain.Case) error {
	f, _ := json.Marshal(c.Filters)
	err := s.Store.Exec(ctx, `INSERT INTO cases (`+uiCaseCols+`) SELECT ?, ?, ?, ?, ?, ?, ?, toUInt8(?), ?, ?, ?, ?`,
		c.ID, c.Name, uiUTC(c.From), uiUTC(c.To), string(f), c.Notes, c.Status, uiBoolU8(c.LegalHold), c.CreatedBy,
		uiUTC(c.CreatedAt), uiUTC(c.UpdatedAt), c.Version)
	if err != nil {
		return fmt.Errorf("save case: %w", err)
	}
	return nil
}

// HoldEvidence copies every raw line of the case window (and its nodes,
// if the case names some) into case_evidence, which is not partitioned by
// time, so retention's DROP PARTITION never reaches it. Re-holding writes
// the same keys, which fold together. It returns the lines held in all.
func (s UIStore) HoldEvidence(ctx context.Context, c domain.Case, by string, at time.Time) (uint64, error) {
	where := "ts >= ? AND ts <= ?"
	args := []any{c.ID, uiUTC(at), by, uiUTC(c.From), uiUTC(c.To)}
	if len(c.Filters.Nodes) > 0 {
		where += " AND has(?, node)"
		args = append(args, c.Filters.Nodes)
	}
	// The copy names each line's file and digest whichever way the line
	// stores them (migration 0013): the window's sources are read first
	// and given to the copy. A source that appears after that read is
	// left to the next hold, like a line stored after the copy.
	var refs []uint64
	if err := s.Store.QueryRow(ctx, "SELECT groupUniqArray(source_ref) FROM raw_lines WHERE source_ref != 0 AND "+where,
		args[3:]...).Scan(&refs); err != nil {
		return 0, fmt.Errorf("hold evidence: sources: %w", err)
	}
	names, err := readLineSources(ctx, s.Store, refs)
	if err != nil {
		return 0, fmt.Errorf("hold evidence: %w", err)
	}
	// A ref without a row (its lines stored by a write that died before
	// its window committed) is held too, with empty names, rather than
	// leaving the lines out of the hold.
	for _, r := range refs {
		if _, ok := names[r]; !ok {
			names[r] = LineSource{}
		}
	}
	// One copy, or with more sources than one statement can name, one
	// per part of them (the first also copies the rows that hold their
	// own names).
	for i, part := range newSourceArrays(names).split(sourceChunkBytes) {
		srcExpr, srcArgs := lineSourceExpr(part, false)
		digestExpr, digestArgs := lineSourceExpr(part, true)
		filter, filterArgs := "has(?, source_ref)", []any{part.refs}
		if i == 0 {
			filter, filterArgs = lineSourceFilter(part)
		}
		all := append([]any{args[0]}, srcArgs...)
		all = append(all, digestArgs...)
		all = append(all, args[1:]...)
		all = append(all, filterArgs...)
		err = s.Store.Exec(ctx, `INSERT INTO case_evidence (case_id, line_id, ts, ts_ns, node, role, log_format, source, file_digest,
 byte_offset, line, held_at, held_by)
SELECT ?, line_id, ts, ts_ns, node, role, log_format, `+srcExpr+`, `+digestExpr+`, byte_offset, line, ?, ?
FROM raw_lines FINAL WHERE `+where+` AND `+filter, all...)
		if err != nil {
			return 0, fmt.Errorf("hold evidence: %w", err)
		}
	}
	return s.HeldLines(ctx, c.ID)
}

// HeldLines counts the distinct lines under the case's hold.
func (s UIStore) HeldLines(ctx context.Context, caseID string) (uint64, error) {
	var n uint64
	if err := s.Store.QueryRow(ctx, "SELECT uniqExact(line_id) FROM case_evidence WHERE case_id = ?", caseID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count held lines: %w", err)
	}
	return n, nil
}

// HoldInfo reads the latest hold of a case from case_evidence.
func (s UIStore) HoldInfo(ctx context.Context, caseID string) (domain.HoldInfo, error) {
	var rows []domain.HoldInfo
	if err := s.Store.Select(ctx, &rows, "SELECT argMax(held_by, held_at) AS last_held_by, max(held_at) AS last_held_at FROM case_evidence WHERE case_id = ?", caseID); err != nil {
		return domain.HoldInfo{}, fmt.Errorf("hold info: %w", err)
	}
	if len(rows) == 0 {
		return domain.HoldInfo{}, nil
	}
	return rows[0], nil
}

func uiBoolU8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

const uiAffectedCols = `reconstruction_id, case_id, tenant, affected_role, requests, first_ts, last_ts, models, nodes, confidence,
 request_keys, finding_ids, created_at`

// Reconstruction picks the list a case shows: the newest reconstruction
// made for the case, else the newest one overlapping the case window.
func (s UIStore) Reconstruction(ctx context.Context, c domain.Case) (id, source string, err error) {
	var rows []struct {
		ID string `ch:"rid"`
	}
	err = s.Store.Select(ctx, &rows, `SELECT reconstruction_id AS rid FROM affected WHERE case_id = ?
GROUP BY reconstruction_id ORDER BY max(created_at) DESC, rid DESC LIMIT 1`, c.ID)
	if err != nil {
		return "", "", fmt.Errorf("reconstruction: %w", err)
	}
	if len(rows) == 1 {
		return rows[0].ID, "case", nil
	}
	err = s.Store.Select(ctx, &rows, `SELECT reconstruction_id AS rid FROM affected
GROUP BY reconstruction_id HAVING min(first_ts) <= ? AND max(last_ts) >= ?
ORDER BY max(created_at) DESC, rid DESC LIMIT 1`, uiUTC(c.To), uiUTC(c.From))
	if err != nil {
		return "", "", fmt.Errorf("reconstruction: %w", err)
	}
	if len(rows) == 1 {
		return rows[0].ID, "window", nil
	}
	return "", "", nil
}

// AffectedPage reads up to limit rows of a reconstruction after key,
// optionally narrowed to the case's tenants.
func (s UIStore) AffectedPage(ctx context.Context, reconstructionID string, tenants []string, after *domain.AffectedKey, limit int) ([]domain.AffectedListRow, error) {
	where := "reconstruction_id = ?"
	args := []any{reconstructionID}
	if len(tenants) > 0 {
		where, args = where+" AND has(?, tenant)", append(args, tenants)
	}
	if after != nil {
		where += " AND (affected_role > ? OR (affected_role = ? AND tenant > ?))"
		args = append(args, after.Role, after.Role, after.Tenant)
	}
	var out []domain.AffectedListRow
	// A reconstruction's id is a hash of its content, so re-running the
	// analyzers over the same data stores the same rows again (affected is
	// a plain MergeTree): one row per (role, tenant) is read.
	err := s.Store.Select(ctx, &out, "SELECT "+uiAffectedCols+" FROM affected WHERE "+where+
		" ORDER BY affected_role, tenant, created_at DESC LIMIT 1 BY affected_role, tenant LIMIT ?", append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("affected: %w", err)
	}
	return out, s.addTiers(ctx, reconstructionID, out)
}

// AffectedCount counts a reconstruction's rows with the same narrowing.
func (s UIStore) AffectedCount(ctx context.Context, reconstructionID string, tenants []string) (uint64, error) {
	where := "reconstruction_id = ?"
	args := []any{reconstructionID}
	if len(tenants) > 0 {
		where, args = where+" AND has(?, tenant)", append(args, tenants)
	}
	var n uint64
	if err := s.Store.QueryRow(ctx, "SELECT uniqExact(affected_role, tenant) FROM affected WHERE "+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count affected: %w", err)
	}
	return n, nil
}

// AnalyzerVersions lists the analyzers and versions behind findings.
func (s UIStore) AnalyzerVersions(ctx context.Context, findingIDs []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(findingIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		A string `ch:"analyzer"`
		V string `ch:"analyzer_version"`
	}
	err := s.Store.Select(ctx, &rows, "SELECT DISTINCT analyzer, analyzer_version FROM findings WHERE has(?, finding_id) ORDER BY analyzer, analyzer_version", findingIDs)
	if err != nil {
		return nil, fmt.Errorf("analyzer versions: %w", err)
	}
	for _, r := range rows {
		out[r.A] = append(out[r.A], r.V)
	}
	return out, nil
}

// CaseRuns lists the analyzer runs made for a case.
func (s UIStore) CaseRuns(ctx context.Context, caseID string) ([]domain.CaseRun, error) {
	var out []domain.CaseRun
	err := s.Store.Select(ctx, &out, `SELECT run_id, analyzer, version, started_at, finished_at, status, findings, high, error
FROM analyzer_runs WHERE case_id = ? ORDER BY started_at DESC, run_id LIMIT 200`, caseID)
	if err != nil {
		return nil, fmt.Errorf("case runs: %w", err)
	}
	return out, nil
}
