package web

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// Case is an incident under investigation. Each edit writes a new version
// of the row (cases is a ReplacingMergeTree on version).
type Case struct {
	ID        string      `json:"case_id"`
	Name      string      `json:"name"`
	From      time.Time   `json:"window_from"`
	To        time.Time   `json:"window_to"`
	Filters   CaseFilters `json:"filters"`
	Notes     string      `json:"notes"`
	Status    string      `json:"status"`
	LegalHold bool        `json:"legal_hold"`
	CreatedBy string      `json:"created_by"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`
	Version   uint64      `json:"version,string"`
}

// CaseFilters narrow a case beyond its window. Empty lists mean "all".
type CaseFilters struct {
	Tenants   []string `json:"tenants"`
	Nodes     []string `json:"nodes"`
	Analyzers []string `json:"analyzers"`
}

type caseRow struct {
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

func (r caseRow) toCase() Case {
	c := Case{ID: r.ID, Name: r.Name, From: r.From, To: r.To, Notes: r.Notes, Status: r.Status, LegalHold: r.LegalHold == 1,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Version: r.Version}
	_ = json.Unmarshal([]byte(r.Filters), &c.Filters)
	return c
}

const caseCols = `case_id, name, window_from, window_to, filters, notes, status, legal_hold, created_by, created_at, updated_at, version`

func (s chStore) ListCases(ctx context.Context) ([]Case, error) {
	var rows []caseRow
	if err := s.c.Select(ctx, &rows, "SELECT "+caseCols+" FROM cases FINAL ORDER BY updated_at DESC, case_id LIMIT 10000"); err != nil {
		return nil, fmt.Errorf("list cases: %w", err)
	}
	out := make([]Case, len(rows))
	for i, r := range rows {
		out[i] = r.toCase()
	}
	return out, nil
}

func (s chStore) GetCase(ctx context.Context, id string) (Case, error) {
	var rows []caseRow
	if err := s.c.Select(ctx, &rows, "SELECT "+caseCols+" FROM cases FINAL WHERE case_id = ? LIMIT 1", id); err != nil {
		return Case{}, fmt.Errorf("get case: %w", err)
	}
	if len(rows) == 0 {
		return Case{}, errNotFound
	}
	return rows[0].toCase(), nil
}

// SaveCase writes a new version of the case.
func (s chStore) SaveCase(ctx context.Context, c Case) error {
	f, _ := json.Marshal(c.Filters)
	err := s.c.Exec(ctx, `INSERT INTO cases (`+caseCols+`) SELECT ?, ?, ?, ?, ?, ?, ?, toUInt8(?), ?, ?, ?, ?`,
		c.ID, c.Name, utc(c.From), utc(c.To), string(f), c.Notes, c.Status, boolU8(c.LegalHold), c.CreatedBy,
		utc(c.CreatedAt), utc(c.UpdatedAt), c.Version)
	if err != nil {
		return fmt.Errorf("save case: %w", err)
	}
	return nil
}

// HoldEvidence copies every raw line of the case window (and its nodes,
// if the case names some) into case_evidence, which is not partitioned by
// time, so retention's DROP PARTITION never reaches it. Re-holding writes
// the same keys, which fold together. It returns the lines held in all.
func (s chStore) HoldEvidence(ctx context.Context, c Case, by string, at time.Time) (uint64, error) {
	where := "ts >= ? AND ts <= ?"
	args := []any{c.ID, utc(at), by, utc(c.From), utc(c.To)}
	if len(c.Filters.Nodes) > 0 {
		where += " AND has(?, node)"
		args = append(args, c.Filters.Nodes)
	}
	err := s.c.Exec(ctx, `INSERT INTO case_evidence (case_id, line_id, ts, ts_ns, node, role, log_format, source, file_digest,
 byte_offset, line, held_at, held_by)
SELECT ?, line_id, ts, ts_ns, node, role, log_format, source, file_digest, byte_offset, line, ?, ?
FROM raw_lines FINAL WHERE `+where, args...)
	if err != nil {
		return 0, fmt.Errorf("hold evidence: %w", err)
	}
	return s.HeldLines(ctx, c.ID)
}

// HeldLines counts the distinct lines under the case's hold.
func (s chStore) HeldLines(ctx context.Context, caseID string) (uint64, error) {
	var n uint64
	if err := s.c.QueryRow(ctx, "SELECT uniqExact(line_id) FROM case_evidence WHERE case_id = ?", caseID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count held lines: %w", err)
	}
	return n, nil
}

// HoldInfo is who froze a case's evidence and when (the latest hold).
type HoldInfo struct {
	By string    `ch:"last_held_by" json:"held_by"`
	At time.Time `ch:"last_held_at" json:"held_at"`
}

// HoldInfo reads the latest hold of a case from case_evidence.
func (s chStore) HoldInfo(ctx context.Context, caseID string) (HoldInfo, error) {
	var rows []HoldInfo
	if err := s.c.Select(ctx, &rows, "SELECT argMax(held_by, held_at) AS last_held_by, max(held_at) AS last_held_at FROM case_evidence WHERE case_id = ?", caseID); err != nil {
		return HoldInfo{}, fmt.Errorf("hold info: %w", err)
	}
	if len(rows) == 0 {
		return HoldInfo{}, nil
	}
	return rows[0], nil
}

func boolU8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// AffectedRow is one tenant on a notification list.
type AffectedRow struct {
	ReconstructionID string `ch:"reconstruction_id" json:"reconstruction_id"`
	CaseID           string `ch:"case_id" json:"case_id"`
	Tenant           string `ch:"tenant" json:"tenant"`
	// StoredRole is affected_role as stored (the table's sort key, used
	// for paging); Role is its one spelling, parsed by domain.ParseRole so
	// rows written by older versions read the same.
	StoredRole string      `ch:"affected_role" json:"-"`
	Role       domain.Role `json:"affected_role"`
	// Tier (exposed rows) and Counterparts (the tenants on the other side)
	// are read when the affected table has those columns.
	Tier         domain.Tier `json:"tier,omitempty"`
	Counterparts []string    `json:"counterparts,omitempty"`
	Requests     uint64      `ch:"requests" json:"requests"`
	FirstTS      time.Time   `ch:"first_ts" json:"first_ts"`
	LastTS       time.Time   `ch:"last_ts" json:"last_ts"`
	Models       []string    `ch:"models" json:"models"`
	Nodes        []string    `ch:"nodes" json:"nodes"`
	Confidence   float64     `ch:"confidence" json:"confidence"`
	RequestKeys  []string    `ch:"request_keys" json:"request_keys"`
	FindingIDs   []string    `ch:"finding_ids" json:"finding_ids"`
	CreatedAt    time.Time   `ch:"created_at" json:"created_at"`
}

const affectedCols = `reconstruction_id, case_id, tenant, affected_role, requests, first_ts, last_ts, models, nodes, confidence,
 request_keys, finding_ids, created_at`

// AffectedKey is the keyset position in one reconstruction's list, which
// is the table's sort key (reconstruction_id, affected_role, tenant).
type AffectedKey struct {
	Role   string `json:"r"`
	Tenant string `json:"t"`
}

// Reconstruction picks the list a case shows: the newest reconstruction
// made for the case, else the newest one overlapping the case window.
func (s chStore) Reconstruction(ctx context.Context, c Case) (id, source string, err error) {
	var rows []struct {
		ID string `ch:"rid"`
	}
	err = s.c.Select(ctx, &rows, `SELECT reconstruction_id AS rid FROM affected WHERE case_id = ?
GROUP BY reconstruction_id ORDER BY max(created_at) DESC, rid DESC LIMIT 1`, c.ID)
	if err != nil {
		return "", "", fmt.Errorf("reconstruction: %w", err)
	}
	if len(rows) == 1 {
		return rows[0].ID, "case", nil
	}
	err = s.c.Select(ctx, &rows, `SELECT reconstruction_id AS rid FROM affected
GROUP BY reconstruction_id HAVING min(first_ts) <= ? AND max(last_ts) >= ?
ORDER BY max(created_at) DESC, rid DESC LIMIT 1`, utc(c.To), utc(c.From))
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
func (s chStore) AffectedPage(ctx context.Context, reconstructionID string, tenants []string, after *AffectedKey, limit int) ([]AffectedRow, error) {
	where := "reconstruction_id = ?"
	args := []any{reconstructionID}
	if len(tenants) > 0 {
		where, args = where+" AND has(?, tenant)", append(args, tenants)
	}
	if after != nil {
		where += " AND (affected_role > ? OR (affected_role = ? AND tenant > ?))"
		args = append(args, after.Role, after.Role, after.Tenant)
	}
	var out []AffectedRow
	// A reconstruction's id is a hash of its content, so re-running the
	// analyzers over the same data stores the same rows again (affected is
	// a plain MergeTree): one row per (role, tenant) is read.
	err := s.c.Select(ctx, &out, "SELECT "+affectedCols+" FROM affected WHERE "+where+
		" ORDER BY affected_role, tenant, created_at DESC LIMIT 1 BY affected_role, tenant LIMIT ?", append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("affected: %w", err)
	}
	return out, s.addTiers(ctx, reconstructionID, out)
}

// AffectedCount counts a reconstruction's rows with the same narrowing.
func (s chStore) AffectedCount(ctx context.Context, reconstructionID string, tenants []string) (uint64, error) {
	where := "reconstruction_id = ?"
	args := []any{reconstructionID}
	if len(tenants) > 0 {
		where, args = where+" AND has(?, tenant)", append(args, tenants)
	}
	var n uint64
	if err := s.c.QueryRow(ctx, "SELECT uniqExact(affected_role, tenant) FROM affected WHERE "+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count affected: %w", err)
	}
	return n, nil
}

// AnalyzerVersions lists the analyzers and versions behind findings.
func (s chStore) AnalyzerVersions(ctx context.Context, findingIDs []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(findingIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		A string `ch:"analyzer"`
		V string `ch:"analyzer_version"`
	}
	err := s.c.Select(ctx, &rows, "SELECT DISTINCT analyzer, analyzer_version FROM findings WHERE has(?, finding_id) ORDER BY analyzer, analyzer_version", findingIDs)
	if err != nil {
		return nil, fmt.Errorf("analyzer versions: %w", err)
	}
	for _, r := range rows {
		out[r.A] = append(out[r.A], r.V)
	}
	return out, nil
}

// CaseRuns lists the analyzer runs made for a case.
func (s chStore) CaseRuns(ctx context.Context, caseID string) ([]AnalyzerRun, error) {
	var out []AnalyzerRun
	err := s.c.Select(ctx, &out, `SELECT run_id, analyzer, version, started_at, finished_at, status, findings, high, error
FROM analyzer_runs WHERE case_id = ? ORDER BY started_at DESC, run_id LIMIT 200`, caseID)
	if err != nil {
		return nil, fmt.Errorf("case runs: %w", err)
	}
	return out, nil
}

// AnalyzerRun is one recorded analyzer execution.
type AnalyzerRun struct {
	RunID      string    `ch:"run_id" json:"run_id"`
	Analyzer   string    `ch:"analyzer" json:"analyzer"`
	Version    string    `ch:"version" json:"version"`
	StartedAt  time.Time `ch:"started_at" json:"started_at"`
	FinishedAt time.Time `ch:"finished_at" json:"finished_at"`
	Status     string    `ch:"status" json:"status"`
	Findings   uint32    `ch:"findings" json:"findings"`
	High       uint32    `ch:"high" json:"high"`
	Error      string    `ch:"error" json:"error"`
}
