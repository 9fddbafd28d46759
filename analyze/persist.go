package analyze

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

const insertRun = `INSERT INTO analyzer_runs (run_id, analyzer, version, params, window_from, window_to, watermark,
 started_at, finished_at, status, findings, high, error, trigger, case_id)
SELECT ?, ?, ?, ?, toDateTime(?), toDateTime(?), toDateTime(?), toDateTime(?), toDateTime(?), ?, ?, ?, ?, ?, ?`

func unix(t time.Time) uint32 {
	if t.IsZero() || t.Unix() < 0 {
		return 0
	}
	return uint32(t.Unix())
}

// saveRun appends one immutable analyzer_runs row.
func saveRun(ctx context.Context, db DB, r Run) error {
	if err := db.Exec(ctx, insertRun, r.ID, r.Analyzer, r.Version, r.Params, unix(r.Window.From), unix(r.Window.To),
		unix(r.Watermark), unix(r.Started), unix(r.Finished), r.Status, uint32(r.Findings), uint32(r.High), r.Error,
		r.Trigger, r.CaseID); err != nil {
		return fmt.Errorf("record run of %s: %w", r.Analyzer, err)
	}
	return nil
}

const insertFindings = `INSERT INTO findings (finding_id, run_id, analyzer, analyzer_version, severity, confidence, ts,
 first_ts, last_ts, request_key, gateway_request_id, tenant, bootstrap_room, prefill_node, decode_node,
 decode_dp_rank, rids, title, explanation, group_key, foreign_tenants, foreign_request_keys, evidence_line_ids,
 detail_keys, detail_values, created_at)`

func saveFindings(ctx context.Context, db DB, fs []Finding, now time.Time) error {
	if len(fs) == 0 {
		return nil
	}
	b, err := db.PrepareBatch(ctx, insertFindings)
	if err != nil {
		return fmt.Errorf("prepare findings insert: %w", err)
	}
	for _, f := range fs {
		keys := make([]string, 0, len(f.Details))
		for k := range f.Details {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		vals := make([]string, len(keys))
		for i, k := range keys {
			vals[i] = f.Details[k]
		}
		if err := b.Append(f.ID, f.RunID, f.Analyzer, f.AnalyzerVersion, string(f.Severity), f.Confidence, f.TS.UTC(),
			f.FirstTS.UTC(), f.LastTS.UTC(), f.RequestKey, f.GatewayRequestID, f.Tenant, f.Room, f.PrefillNode,
			f.DecodeNode, f.DecodeDPRank, nonNil(f.RIDs), f.Title, f.Explanation, f.GroupKey, nonNil(f.ForeignTenants),
			nonNil(f.ForeignRequestKeys), nonNilU(f.Evidence), keys, vals, now); err != nil {
			_ = b.Abort()
			return fmt.Errorf("append finding %s: %w", f.ID, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert findings: %w", err)
	}
	return nil
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func nonNilU(v []uint64) []uint64 {
	if v == nil {
		return []uint64{}
	}
	return v
}

const knownIDsSQL = `SELECT DISTINCT finding_id FROM findings WHERE analyzer = ? AND analyzer_version = ?`

func knownFindingIDs(ctx context.Context, db DB, analyzer, version string) (map[string]bool, error) {
	rows, err := db.Query(ctx, knownIDsSQL, analyzer, version)
	if err != nil {
		return nil, fmt.Errorf("read known findings of %s: %w", analyzer, err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("scan finding id: %w", err)
		}
		out[id] = true
	}
	return out, rows.Err()
}

const runsSQL = `SELECT run_id, analyzer, version, params, window_from, window_to, watermark, started_at, finished_at,
 status, findings, high, error, trigger, case_id
FROM analyzer_runs
ORDER BY started_at, run_id`

// Runs returns every recorded run, oldest first.
func Runs(ctx context.Context, db DB) ([]Run, error) {
	rows, err := db.Query(ctx, runsSQL)
	if err != nil {
		return nil, fmt.Errorf("read analyzer runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var r Run
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

// LatestRuns picks, per analyzer, the latest run that did not fail (the
// latest version wins among runs started in the same second).
func LatestRuns(runs []Run) map[string]Run { return domain.LatestRuns(runs) }

const findingsSQL = `SELECT finding_id, run_id, analyzer, analyzer_version, severity, confidence, ts, first_ts, last_ts,
 request_key, gateway_request_id, tenant, bootstrap_room, prefill_node, decode_node, decode_dp_rank, rids, title,
 explanation, group_key, foreign_tenants, foreign_request_keys, evidence_line_ids, detail_keys, detail_values
FROM findings
WHERE has(?, run_id)
ORDER BY analyzer, ts, finding_id`

// FindingsOfRuns reads the findings of the given runs.
func FindingsOfRuns(ctx context.Context, db DB, runIDs []string) ([]Finding, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	return scanFindings(ctx, db, findingsSQL, runIDs)
}

func scanFindings(ctx context.Context, db DB, query string, arg []string) ([]Finding, error) {
	rows, err := db.Query(ctx, query, arg)
	if err != nil {
		return nil, fmt.Errorf("read findings: %w", err)
	}
	defer rows.Close()
	var out []Finding
	for rows.Next() {
		var f Finding
		var sev string
		var keys, vals []string
		if err := rows.Scan(&f.ID, &f.RunID, &f.Analyzer, &f.AnalyzerVersion, &sev, &f.Confidence, &f.TS, &f.FirstTS,
			&f.LastTS, &f.RequestKey, &f.GatewayRequestID, &f.Tenant, &f.Room, &f.PrefillNode, &f.DecodeNode,
			&f.DecodeDPRank, &f.RIDs, &f.Title, &f.Explanation, &f.GroupKey, &f.ForeignTenants, &f.ForeignRequestKeys,
			&f.Evidence, &keys, &vals); err != nil {
			return nil, fmt.Errorf("scan finding: %w", err)
		}
		f.Severity = Severity(sev)
		f.TS, f.FirstTS, f.LastTS = f.TS.UTC(), f.FirstTS.UTC(), f.LastTS.UTC()
		f.Details = make(map[string]string, len(keys))
		for i, k := range keys {
			if i < len(vals) {
				f.Details[k] = vals[i]
			}
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// CurrentFindingsFrom is the current findings as a table expression (see
// LatestFindings for the rule); its one parameter is CurrentRunIDs.
// Every reader — the CLI, the reconstruction, the UI and the API — reads
// findings through it, so they count the same findings.
const CurrentFindingsFrom = `(SELECT * FROM findings WHERE has(?, run_id)
 ORDER BY finding_id, created_at DESC, run_id DESC LIMIT 1 BY finding_id)`

const currentFindingsSQL = `SELECT finding_id, run_id, analyzer, analyzer_version, severity, confidence, ts, first_ts,
 last_ts, request_key, gateway_request_id, tenant, bootstrap_room, prefill_node, decode_node, decode_dp_rank, rids,
 title, explanation, group_key, foreign_tenants, foreign_request_keys, evidence_line_ids, detail_keys, detail_values
FROM ` + CurrentFindingsFrom

// CurrentRunIDs lists the runs whose findings are current: the parameter
// of CurrentFindingsFrom. Per analyzer, its latest run that was not a live
// round (the CLI's rule: a new analysis supersedes the previous one,
// findings it no longer makes included), plus the live rounds after it
// that recorded findings (a live round records only findings no run had).
func CurrentRunIDs(ctx context.Context, db DB) ([]string, error) {
	runs, err := Runs(ctx, db)
	if err != nil {
		return nil, err
	}
	return domain.CurrentRunIDs(runs), nil
}

// LatestFindings returns the current findings, the one set the CLI, the
// UI, the API and the notification list all read: per analyzer, the
// findings of its latest analysis (a run that was not a live round), and
// the findings live rounds recorded since. So analyzing twice does not
// double a finding, a new analysis drops what it no longer finds, and a
// live round over the last minutes adds what it discovers without hiding
// what the analysis of the incident found. Sorted by analyzer, time and id.
func LatestFindings(ctx context.Context, db DB) ([]Finding, error) {
	runIDs, err := CurrentRunIDs(ctx, db)
	if err != nil || len(runIDs) == 0 {
		return nil, err
	}
	fs, err := scanFindings(ctx, db, currentFindingsSQL, runIDs)
	if err != nil {
		return nil, err
	}
	sort.Slice(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Analyzer != b.Analyzer {
			return a.Analyzer < b.Analyzer
		}
		if !a.TS.Equal(b.TS) {
			return a.TS.Before(b.TS)
		}
		return a.ID < b.ID
	})
	return fs, nil
}

const insertAffected = `INSERT INTO affected (reconstruction_id, case_id, tenant, affected_role, requests, first_ts,
 last_ts, models, nodes, confidence, request_keys, finding_ids, created_at, tier, counterparts, prompt_tokens,
 output_tokens, evidence_line_ids)`

func saveAffected(ctx context.Context, db DB, rec *Reconstruction) error {
	if len(rec.Rows) == 0 {
		return nil
	}
	b, err := db.PrepareBatch(ctx, insertAffected)
	if err != nil {
		return fmt.Errorf("prepare affected insert: %w", err)
	}
	for _, a := range rec.Rows {
		if err := b.Append(rec.ID, rec.CaseID, a.Tenant, string(a.Role), uint64(a.Requests), a.First.UTC(), a.Last.UTC(),
			nonNil(a.Models), nonNil(a.Nodes), a.Confidence, nonNil(a.RequestKeys), nonNil(a.FindingIDs), rec.Created,
			string(a.Tier), nonNil(a.Counterparts), a.PromptTokens, a.OutputTokens, nonNilU(a.Evidence)); err != nil {
			_ = b.Abort()
			return fmt.Errorf("append affected row %s/%s: %w", a.Role, a.Tenant, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert affected: %w", err)
	}
	return nil
}

const latestReconstructionSQL = `SELECT reconstruction_id, max(created_at) FROM affected GROUP BY reconstruction_id`

// affectedSQL reads one reconstruction. Its id is a hash of its content,
// so analyzing unchanged data again stores the same rows under the same id
// a second time: only the latest save is read, and DISTINCT folds two saves
// made in the same second.
const affectedSQL = `SELECT DISTINCT reconstruction_id, case_id, tenant, affected_role, requests, first_ts, last_ts, models,
 nodes, confidence, request_keys, finding_ids, created_at, tier, counterparts, prompt_tokens, output_tokens,
 evidence_line_ids
FROM affected
WHERE reconstruction_id = ? AND created_at = (SELECT max(created_at) FROM affected WHERE reconstruction_id = ?)
ORDER BY affected_role, tenant`

// LatestAffected reads the most recent reconstruction's rows.
func LatestAffected(ctx context.Context, db DB) (*Reconstruction, error) {
	rows, err := db.Query(ctx, latestReconstructionSQL)
	if err != nil {
		return nil, fmt.Errorf("find latest reconstruction: %w", err)
	}
	var id string
	var at time.Time
	for rows.Next() {
		var rid string
		var t time.Time
		if err := rows.Scan(&rid, &t); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan reconstruction: %w", err)
		}
		if t.After(at) || (t.Equal(at) && rid > id) {
			id, at = rid, t
		}
	}
	rows.Close()
	rec := &Reconstruction{ID: id, Created: at.UTC()}
	if id == "" {
		return rec, nil
	}
	rows, err = db.Query(ctx, affectedSQL, id, id)
	if err != nil {
		return nil, fmt.Errorf("read affected: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a AffectedRow
		var n uint64
		var created time.Time
		var role, tier string
		if err := rows.Scan(&rec.ID, &rec.CaseID, &a.Tenant, &role, &n, &a.First, &a.Last, &a.Models, &a.Nodes,
			&a.Confidence, &a.RequestKeys, &a.FindingIDs, &created, &tier, &a.Counterparts, &a.PromptTokens,
			&a.OutputTokens, &a.Evidence); err != nil {
			return nil, fmt.Errorf("scan affected row: %w", err)
		}
		a.Tier = domain.Tier(tier)
		a.Requests = int(n)
		a.Role = domain.Role(role)
		a.First, a.Last = a.First.UTC(), a.Last.UTC()
		rec.Rows = append(rec.Rows, a)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Received first, then exposed from the most certain tier down.
	sort.SliceStable(rec.Rows, func(i, j int) bool {
		x, y := rec.Rows[i], rec.Rows[j]
		if x.Role != y.Role {
			return x.Role.Rank() < y.Role.Rank()
		}
		if x.Tier != y.Tier {
			return x.Tier.Rank() < y.Tier.Rank()
		}
		return x.Tenant < y.Tenant
	})
	return rec, nil
}

// clusterDB is implemented by stores that know their cluster: on a cluster
// the findings rows live in findings_local on every shard.
type clusterDB interface {
	Cluster() string
	Database() string
}

// saveFindingForeign writes the foreign tenants and request keys the
// reconstruction found back into the stored victim findings, so every
// reader of the findings table (the CLI, the UI, exports) sees them. One
// ALTER ... UPDATE mutation per reconstruction; ClickHouse applies it in
// the background (18.16 has no synchronous mutations), normally within
// seconds.
func saveFindingForeign(ctx context.Context, db DB, fs []Finding) error {
	table := "findings"
	if c, ok := db.(clusterDB); ok && c.Cluster() != "" {
		// ON CLUSTER resolves unqualified names in each server's default
		// database, so the table is qualified.
		table = c.Database() + ".findings_local ON CLUSTER " + c.Cluster()
	}
	q := "ALTER TABLE " + table + ` UPDATE
 foreign_tenants = arrayElement(CAST(? AS Array(Array(String))), indexOf(CAST(? AS Array(String)), finding_id)),
 foreign_request_keys = arrayElement(CAST(? AS Array(Array(String))), indexOf(CAST(? AS Array(String)), finding_id))
WHERE has(CAST(? AS Array(String)), finding_id)`
	// Statements stay well under max_query_size (256 KiB by default):
	// placeholder victims name hundreds of source requests each.
	const chunkBytes = 96 << 10
	for len(fs) > 0 {
		var (
			ids            []string
			tenants, keys  [][]string
			size, consumed int
		)
		for _, f := range fs {
			n := 3 * (len(f.ID) + 4)
			for _, t := range f.ForeignTenants {
				n += len(t) + 4
			}
			for _, k := range f.ForeignRequestKeys {
				n += len(k) + 4
			}
			if consumed > 0 && size+n > chunkBytes {
				break
			}
			size += n
			consumed++
			ids = append(ids, f.ID)
			tenants = append(tenants, nonNil(f.ForeignTenants))
			keys = append(keys, nonNil(f.ForeignRequestKeys))
		}
		if err := db.Exec(ctx, q, tenants, ids, keys, ids, ids); err != nil {
			return fmt.Errorf("store foreign tenants of %d findings: %w", len(ids), err)
		}
		fs = fs[consumed:]
	}
	return nil
}
