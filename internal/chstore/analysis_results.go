package chstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/kvtrail/kvtrail/domain"
)

// The analysis' writes, and the reads that decide what a run adds: the
// linked requests (request_facts), runs and findings, the notification
// list (affected) and the foreign tenants it fills into victim findings.

// factColumns are request_facts' columns as SaveRequestFacts writes them.
var factColumns = strings.Fields(`request_key ts ts_ns tenant model gateway_request_id bootstrap_room
 status prompt_tokens completion_tokens cached_tokens ttft_ms duration_ms prefill_node prefill_rid
 prefill_dp_rank prefill_prompt_tokens prefill_finish_type prefill_rejected prefill_limit decode_node
 decode_rid decode_dp_rank decode_prompt_tokens decode_finish_type transfer_failed transfer_reason
 corruption links line_ids version`)

// anFactBatch bounds one insert's rows.
const anFactBatch = 50_000

// factSendRows is how many rows go in one block of a request_facts
// INSERT. The driver encodes a block into a buffer that starts empty on
// each pooled connection (FreeBufOnConnRelease) and grows by a quarter at a
// time: a whole 50,000-row block (16 MB) was copied about five times over
// in fresh memory, 11 of the 104 CPU-seconds of a scale-20 analysis
// (pprof). Blocks of this size reuse one small buffer for the INSERT, and
// the server still stores the INSERT's rows together.
const factSendRows = 8192

// SaveRequestFacts writes linked requests to request_facts with the given
// version (a later build with a higher version replaces earlier rows of
// the same key), at most anFactBatch rows per INSERT.
func (s *Store) SaveRequestFacts(ctx context.Context, facts []*domain.Request, version uint64) error {
	return s.RequestFactsInsert(facts, version, nil)(ctx)
}

// RequestFactsInsert builds the request_facts rows of facts now and
// returns the function that sends them (SaveRequestFacts calls it at once).
// An analysis sends a slice's rows while it reads the next slice
// (analyze/factsave.go); what it holds meanwhile is these columns, not the
// linked requests. The rows go in as one slice per column: row by row, the
// driver boxed every value and grew each column from empty, 29
// allocations and 4 KB a request. When dg is set it gets the rows of the
// requests the gateway logged (what a link records, domain.FactLink).
func (s *Store) RequestFactsInsert(facts []*domain.Request, version uint64, dg *domain.FactDigest) func(context.Context) error {
	// The blocks are built before any INSERT opens, so the server does not
	// hold an open INSERT while the client computes rows.
	var blocks []*factBlock
	for start := 0; start < len(facts); start += anFactBatch {
		blocks = append(blocks, newFactBlock(facts[start:min(start+anFactBatch, len(facts))], version, dg))
	}
	return func(ctx context.Context) error {
		for _, block := range blocks {
			w, err := s.OpenInsert(ctx, "request_facts", factColumns)
			if err != nil {
				return fmt.Errorf("prepare request_facts insert: %w", err)
			}
			for start := 0; start < len(block.key); start += factSendRows {
				if err := w.AppendColumns(block.columns(start, min(start+factSendRows, len(block.key)))...); err != nil {
					_ = w.Abort()
					return fmt.Errorf("append request facts: %w", err)
				}
				if err := w.Flush(); err != nil {
					_ = w.Abort()
					return fmt.Errorf("insert request_facts: %w", err)
				}
			}
			if err := w.Send(); err != nil {
				return fmt.Errorf("insert request_facts: %w", err)
			}
		}
		return nil
	}
}

// factBlock holds request_facts rows column by column, in factColumns'
// order.
type factBlock struct {
	key, tenant, model, gwID, pNode, pRID, pFin, dNode, dRID, dFin, reason, links []string
	ts                                                                            []time.Time
	tsNs, room, prompt, completion, cached, pPrompt, pLimit, dPrompt, version     []uint64
	status                                                                        []uint16
	ttft, dur                                                                     []float64
	pRank, dRank                                                                  []int16
	rejected, failed, corrupt                                                     []uint8
	lines                                                                         [][]uint64
}

func newFactBlock(facts []*domain.Request, version uint64, dg *domain.FactDigest) *factBlock {
	n := len(facts)
	strs := func() []string { return make([]string, 0, n) }
	u64s := func() []uint64 { return make([]uint64, 0, n) }
	u8s := func() []uint8 { return make([]uint8, 0, n) }
	b := &factBlock{key: strs(), tenant: strs(), model: strs(), gwID: strs(), pNode: strs(), pRID: strs(), pFin: strs(),
		dNode: strs(), dRID: strs(), dFin: strs(), reason: strs(), links: strs(), ts: make([]time.Time, 0, n),
		tsNs: u64s(), room: u64s(), prompt: u64s(), completion: u64s(), cached: u64s(), pPrompt: u64s(), pLimit: u64s(),
		dPrompt: u64s(), version: u64s(), status: make([]uint16, 0, n), ttft: make([]float64, 0, n), dur: make([]float64, 0, n),
		pRank: make([]int16, 0, n), dRank: make([]int16, 0, n), rejected: u8s(), failed: u8s(), corrupt: u8s(),
		lines: make([][]uint64, 0, n)}
	var buf []byte
	for _, f := range facts {
		r := f.Row()
		b.add(&r, version)
		if dg != nil && f.GW != nil {
			buf = dg.Add(&r, buf)
		}
	}
	return b
}

// columns is rows [i, j) of b, one slice per column.
func (b *factBlock) columns(i, j int) []any {
	return []any{b.key[i:j], b.ts[i:j], b.tsNs[i:j], b.tenant[i:j], b.model[i:j], b.gwID[i:j], b.room[i:j],
		b.status[i:j], b.prompt[i:j], b.completion[i:j], b.cached[i:j], b.ttft[i:j], b.dur[i:j], b.pNode[i:j],
		b.pRID[i:j], b.pRank[i:j], b.pPrompt[i:j], b.pFin[i:j], b.rejected[i:j], b.pLimit[i:j], b.dNode[i:j],
		b.dRID[i:j], b.dRank[i:j], b.dPrompt[i:j], b.dFin[i:j], b.failed[i:j], b.reason[i:j], b.corrupt[i:j],
		b.links[i:j], b.lines[i:j], b.version[i:j]}
}

// add appends r as one row.
func (b *factBlock) add(r *domain.FactRow, version uint64) {
	b.key, b.ts, b.tsNs = append(b.key, r.Key), append(b.ts, r.TS), append(b.tsNs, uint64(r.TS.UnixNano()))
	b.tenant, b.model, b.gwID, b.room = append(b.tenant, r.Tenant), append(b.model, r.Model), append(b.gwID, r.GatewayID), append(b.room, r.Room)
	b.status, b.prompt, b.completion, b.cached = append(b.status, r.Status), append(b.prompt, r.Prompt), append(b.completion, r.Completion), append(b.cached, r.Cached)
	b.ttft, b.dur = append(b.ttft, r.TTFTMs), append(b.dur, r.DurationMs)
	b.pNode, b.pRID, b.pRank, b.pPrompt, b.pFin = append(b.pNode, r.PrefillNode), append(b.pRID, r.PrefillRID), append(b.pRank, r.PrefillRank), append(b.pPrompt, r.PrefillPrompt), append(b.pFin, r.PrefillFinish)
	b.rejected, b.pLimit = append(b.rejected, r.Rejected), append(b.pLimit, r.PrefillLimit)
	b.dNode, b.dRID, b.dRank, b.dPrompt, b.dFin = append(b.dNode, r.DecodeNode), append(b.dRID, r.DecodeRID), append(b.dRank, r.DecodeRank), append(b.dPrompt, r.DecodePrompt), append(b.dFin, r.DecodeFinish)
	b.failed, b.reason, b.corrupt = append(b.failed, r.Failed), append(b.reason, r.Reason), append(b.corrupt, r.Corrupt)
	b.links, b.lines, b.version = append(b.links, r.Links), append(b.lines, r.Lines), append(b.version, version)
}

const anInsertRun = `INSERT INTO analyzer_runs (run_id, analyzer, version, params, window_from, window_to, watermark,
 started_at, finished_at, status, findings, high, error, trigger, case_id)
SELECT ?, ?, ?, ?, toDateTime(?), toDateTime(?), toDateTime(?), toDateTime(?), toDateTime(?), ?, ?, ?, ?, ?, ?`

// SaveRun appends one immutable analyzer_runs row.
func (s *Store) SaveRun(ctx context.Context, r domain.Run) error {
	if err := s.Exec(ctx, anInsertRun, r.ID, r.Analyzer, r.Version, r.Params, UnixArg(r.Window.From),
		UnixArg(r.Window.To), UnixArg(r.Watermark), UnixArg(r.Started), UnixArg(r.Finished), r.Status,
		uint32(r.Findings), uint32(r.High), r.Error, r.Trigger, r.CaseID); err != nil {
		return fmt.Errorf("record run of %s: %w", r.Analyzer, err)
	}
	return nil
}

// findingInsertColumns are the findings table's columns as saveFindings sends
// them.
var findingInsertColumns = strings.Fields(`finding_id run_id analyzer analyzer_version severity confidence ts
 first_ts last_ts request_key gateway_request_id tenant bootstrap_room prefill_node decode_node
 decode_dp_rank rids title explanation group_key foreign_tenants foreign_request_keys evidence_line_ids
 detail_keys detail_values created_at`)

// SaveFindings writes findings, created at now, in inserts of at most
// anFindingBatch.
func (s *Store) SaveFindings(ctx context.Context, fs []domain.Finding, now time.Time) error {
	// In inserts of anFindingBatch: the client holds a batch's columns until
	// it is sent, and one batch of a run's findings (hundreds of thousands of
	// abort_reuse leads at 10M requests) held 580 MB.
	for start := 0; start < len(fs); start += anFindingBatch {
		if err := s.saveFindings(ctx, fs[start:min(start+anFindingBatch, len(fs))], now); err != nil {
			return err
		}
	}
	return nil
}

// anFindingBatch is the most findings one insert carries.
const anFindingBatch = 20_000

func (s *Store) saveFindings(ctx context.Context, fs []domain.Finding, now time.Time) error {
	// The lookup keys go first: a key whose finding is not stored yet (a
	// crash between the two inserts) finds nothing, where a finding
	// without its keys would be missing from its requests' pages.
	if err := s.saveFindingKeys(ctx, fs, false); err != nil {
		return err
	}
	// Column by column on the block path, each column made room for
	// before it is filled (block_insert.go): through the driver's row
	// appends, a batch of victims carrying their foreign request keys
	// (951,392 at incident-2026 scale 100) grew its arrays value by value.
	n := len(fs)
	var (
		id, run, analyzer, version, severity = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		conf                                 = make([]float64, n)
		ts, first, last, created             = make([]time.Time, n), make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
		reqKey, gwID, tenant                 = make([]string, n), make([]string, n), make([]string, n)
		room                                 = make([]uint64, n)
		prefill, decode                      = make([]string, n), make([]string, n)
		rank                                 = make([]int16, n)
		rids, foreignTenants, foreignKeys    = make([][]string, n), make([][]string, n), make([][]string, n)
		title, explanation, group            = make([]string, n), make([]string, n), make([]string, n)
		evidence                             = make([][]uint64, n)
		detailKeys, detailValues             = make([][]string, n), make([][]string, n)
	)
	for i := range fs {
		f := &fs[i]
		keys := make([]string, 0, len(f.Details))
		for k := range f.Details {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		vals := make([]string, len(keys))
		for j, k := range keys {
			vals[j] = f.Details[k]
		}
		id[i], run[i], analyzer[i], version[i], severity[i] = f.ID, f.RunID, f.Analyzer, f.AnalyzerVersion, string(f.Severity)
		conf[i], ts[i], first[i], last[i], created[i] = f.Confidence, f.TS.UTC(), f.FirstTS.UTC(), f.LastTS.UTC(), now
		reqKey[i], gwID[i], tenant[i], room[i] = f.RequestKey, f.GatewayRequestID, f.Tenant, f.Room
		prefill[i], decode[i], rank[i], rids[i] = f.PrefillNode, f.DecodeNode, f.DecodeDPRank, anStrings(f.RIDs)
		title[i], explanation[i], group[i] = f.Title, f.Explanation, f.GroupKey
		foreignTenants[i], foreignKeys[i], evidence[i] = anStrings(f.ForeignTenants), anStrings(f.ForeignRequestKeys), anU64s(f.Evidence)
		detailKeys[i], detailValues[i] = keys, vals
	}
	return s.insertColumns(ctx, "findings", findingInsertColumns, id, run, analyzer, version, severity, conf, ts, first, last,
		reqKey, gwID, tenant, room, prefill, decode, rank, rids, title, explanation, group, foreignTenants, foreignKeys,
		evidence, detailKeys, detailValues, created)
}

// saveFindingKeys writes the lookup rows of findings (migration 0008 says
// what each key serves; 0015 why kvtrail, not a view, writes them): the
// finding's id ('f:'), its gateway request and each foreign request key
// ('r:') and its room ('b:', not 0). With foreignOnly, only the foreign
// request keys: what SaveFindingForeign adds to stored findings. Rows are
// sent in inserts of anKeyBatch; a repeat is harmless (a
// ReplacingMergeTree, read by key).
func (s *Store) saveFindingKeys(ctx context.Context, fs []domain.Finding, foreignOnly bool) error {
	type row struct {
		key string
		f   *domain.Finding
	}
	b := keyBatch[row]{s: s, table: "finding_keys", columns: findingKeyColumns, split: func(rows []row) []any {
		key, id, analyzer, run := make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows))
		ts := make([]time.Time, len(rows))
		for i, r := range rows {
			key[i], id[i], analyzer[i], ts[i], run[i] = r.key, r.f.ID, r.f.Analyzer, r.f.TS.UTC(), r.f.RunID
		}
		return []any{key, id, analyzer, ts, run}
	}}
	for i := range fs {
		f := &fs[i]
		if !foreignOnly {
			if err := b.add(ctx, row{"f:" + f.ID, f}); err != nil {
				return err
			}
			if f.GatewayRequestID != "" {
				if err := b.add(ctx, row{"r:" + f.GatewayRequestID, f}); err != nil {
					return err
				}
			}
			if f.Room != 0 {
				if err := b.add(ctx, row{"b:" + strconv.FormatUint(f.Room, 10), f}); err != nil {
					return err
				}
			}
		}
		for _, k := range f.ForeignRequestKeys {
			if k == "" {
				continue
			}
			if err := b.add(ctx, row{"r:" + k, f}); err != nil {
				return err
			}
		}
	}
	return b.flush(ctx)
}

// findingKeyColumns are finding_keys' columns as SaveFindings sends them.
var findingKeyColumns = []string{"key", "finding_id", "analyzer", "ts", "run_id"}

// keyBatch sends the rows of a lookup table (finding_keys)
// in inserts of anKeyBatch rows, one slice per column (split): row by row,
// the driver boxed every value, 580,497 allocations for 80,000 keys
// against 100,532 (BenchmarkSaveFindingKeys). The columns are built
// before the INSERT opens, as request_facts' are.
type keyBatch[T any] struct {
	s       *Store
	table   string
	columns []string
	split   func([]T) []any
	rows    []T
}

func (k *keyBatch[T]) add(ctx context.Context, r T) error {
	k.rows = append(k.rows, r)
	if len(k.rows) >= anKeyBatch {
		return k.flush(ctx)
	}
	return nil
}

func (k *keyBatch[T]) flush(ctx context.Context) error {
	if len(k.rows) == 0 {
		return nil
	}
	cols := k.split(k.rows)
	k.rows = k.rows[:0]
	return k.s.insertColumns(ctx, k.table, k.columns, cols...)
}

// insertColumns writes one INSERT into table of the rows in cols, one
// slice per column in the order of columns, built before the INSERT opens.
func (s *Store) insertColumns(ctx context.Context, table string, columns []string, cols ...any) error {
	w, err := s.OpenInsert(ctx, table, columns)
	if err != nil {
		return fmt.Errorf("prepare %s insert: %w", table, err)
	}
	if bw, ok := w.(*blockWriter); ok {
		// On the block path the arrays are encoded where they are.
		if err := bw.SendColumns(cols...); err != nil {
			_ = bw.Abort()
			return fmt.Errorf("insert %s: %w", table, err)
		}
		return nil
	}
	if err := w.AppendColumns(cols...); err != nil {
		_ = w.Abort()
		return fmt.Errorf("append to %s: %w", table, err)
	}
	if err := w.Send(); err != nil {
		return fmt.Errorf("insert %s: %w", table, err)
	}
	return nil
}

// anStrings and anU64s turn nil into empty: the driver wants an array.
func anStrings(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func anU64s(v []uint64) []uint64 {
	if v == nil {
		return []uint64{}
	}
	return v
}

const anKnownIDsSQL = `SELECT DISTINCT finding_id FROM findings WHERE analyzer = ? AND analyzer_version = ?`

// KnownFindingIDs is the set of finding ids any run of this analyzer
// version has recorded.
func (s *Store) KnownFindingIDs(ctx context.Context, analyzer, version string) (map[string]bool, error) {
	rows, err := s.Query(ctx, anKnownIDsSQL, analyzer, version)
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

// SaveAffected writes one reconstruction of the notification list: its
// rows under id, for caseID ("" outside a case), created at created, with
// the lookup rows of their request keys and finding ids. It folds them as
// a stage does (StageAffected): each row's lists are stored sorted and
// unique, and its request count is that of its distinct keys.
func (s *Store) SaveAffected(ctx context.Context, id, caseID string, created time.Time, rows []domain.AffectedRow) error {
	return s.StageAffected().Save(ctx, id, caseID, created, rows)
}

// anKeyBatch bounds one insert into a lookup table.
const anKeyBatch = 100_000

const anLatestReconstructionSQL = `SELECT reconstruction_id, max(created_at) FROM affected GROUP BY reconstruction_id`

// LatestReconstruction is the id and time of the most recently saved
// reconstruction ("" when none is).
func (s *Store) LatestReconstruction(ctx context.Context) (string, time.Time, error) {
	rows, err := s.Query(ctx, anLatestReconstructionSQL)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("find latest reconstruction: %w", err)
	}
	defer rows.Close()
	var id string
	var at time.Time
	for rows.Next() {
		var rid string
		var t time.Time
		if err := rows.Scan(&rid, &t); err != nil {
			return "", time.Time{}, fmt.Errorf("scan reconstruction: %w", err)
		}
		if t.After(at) || (t.Equal(at) && rid > id) {
			id, at = rid, t
		}
	}
	if err := rows.Err(); err != nil {
		return "", time.Time{}, fmt.Errorf("find latest reconstruction: %w", err)
	}
	return id, at.UTC(), nil
}

// anAffectedSQL reads one reconstruction. Its id is a hash of its content,
// so analyzing unchanged data again stores the same rows under the same id
// a second time: only the latest save is read, and DISTINCT folds two saves
// made in the same second.
const anAffectedSQL = `SELECT DISTINCT reconstruction_id, case_id, tenant, affected_role, requests, first_ts, last_ts, models,
 nodes, confidence, request_keys, finding_ids, created_at, tier, counterparts, prompt_tokens, output_tokens,
 evidence_line_ids
FROM affected
WHERE reconstruction_id = ? AND created_at = (SELECT max(created_at) FROM affected WHERE reconstruction_id = ?)
ORDER BY affected_role, tenant`

// wholeBlocks is the setting of a read of a few rows with very large
// arrays. An affected row names every request, finding and evidence line
// of a tenant: at scale 100, 48 rows held 0.9M request keys, 1.3M finding
// ids and 2.7M line ids. ClickHouse 18.16 aims each block at
// preferred_block_size_bytes (1 MB) and, when a row is larger, reads a
// row or two at a time, decoding the granule's arrays again from its
// start each time: the notification list's read took 169 s, where each of
// the three array columns read alone took 1.3-4.5 s and all three with
// the setting at 0 took 6 s (measured on the server, the same rows; the
// bench's read failed on the 60 s read timeout). 0 turns the adaptive
// size off, so a block is up to max_block_size rows.
var wholeBlocks = clickhouse.Settings{"preferred_block_size_bytes": 0}

// AffectedRows reads the rows of reconstruction id as last saved, ordered
// by role and tenant, and the case it was made for.
func (s *Store) AffectedRows(ctx context.Context, id string) (caseID string, out []domain.AffectedRow, err error) {
	return s.affectedRows(WithSettings(ctx, wholeBlocks), id)
}

func (s *Store) affectedRows(ctx context.Context, id string) (caseID string, out []domain.AffectedRow, err error) {
	rows, err := s.Query(ctx, anAffectedSQL, id, id)
	if err != nil {
		return "", nil, fmt.Errorf("read affected: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a domain.AffectedRow
		var n uint64
		var rid string
		var created time.Time
		var role, tier string
		if err := rows.Scan(&rid, &caseID, &a.Tenant, &role, &n, &a.First, &a.Last, &a.Models, &a.Nodes,
			&a.Confidence, &a.RequestKeys, &a.FindingIDs, &created, &tier, &a.Counterparts, &a.PromptTokens,
			&a.OutputTokens, &a.Evidence); err != nil {
			return "", nil, fmt.Errorf("scan affected row: %w", err)
		}
		a.Tier = domain.Tier(tier)
		a.Requests = int(n)
		a.Role = domain.Role(role)
		a.First, a.Last = a.First.UTC(), a.Last.UTC()
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return "", nil, fmt.Errorf("read affected: %w", err)
	}
	return caseID, out, nil
}

// anForeignChunkBytes keeps each statement of SaveFindingForeign well
// under max_query_size (256 KiB by default): placeholder victims name
// hundreds of source requests each.
const anForeignChunkBytes = 96 << 10

// SaveFindingForeign writes the foreign tenants and request keys of the
// given findings into their stored rows, so every reader of the findings
// table (the CLI, the UI, exports) sees them. One ALTER ... UPDATE
// mutation per chunk of findings; ClickHouse applies it in the background
// (18.16 has no synchronous mutations), so it then waits until no mutation
// of the table is left (at most foreignApplyTimeout): an analysis that
// has returned shows its foreign tenants. Without the wait a reader right
// after `kvtrail analyze` could see a victim with none, as a loaded CI
// machine once did.
func (s *Store) SaveFindingForeign(ctx context.Context, fs []domain.Finding) error {
	if len(fs) == 0 {
		return nil
	}
	// The foreign requests' lookup keys first, as saveFindings does.
	if err := s.saveFindingKeys(ctx, fs, true); err != nil {
		return err
	}
	if err := s.saveFindingForeign(ctx, fs); err != nil {
		return err
	}
	return s.waitMutations(ctx, "findings", foreignApplyTimeout)
}

// foreignApplyTimeout bounds the wait for the foreign-tenant mutations.
const foreignApplyTimeout = 5 * time.Minute

// waitMutations waits until table, on this server or every server of the
// cluster, has no unfinished mutation, or fails after timeout.
func (s *Store) waitMutations(ctx context.Context, table string, timeout time.Duration) error {
	l := s.Layout()
	table = l.local(table)
	q := "SELECT count() FROM " + l.system("mutations") + " WHERE database = ? AND table = ? AND is_done = 0"
	deadline := time.Now().Add(timeout)
	for {
		var n uint64
		if err := s.QueryRow(ctx, q, s.Database(), table).Scan(&n); err != nil {
			return fmt.Errorf("wait for mutations of %s: %w", table, err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d mutations of %s still running after %s", n, table, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Store) saveFindingForeign(ctx context.Context, fs []domain.Finding) error {
	table := "findings"
	if s.Cluster() != "" {
		// ON CLUSTER resolves unqualified names in each server's default
		// database, so the table is qualified.
		table = s.Database() + ".findings_local ON CLUSTER " + s.Cluster()
	}
	q := "ALTER TABLE " + table + ` UPDATE
 foreign_tenants = arrayElement(CAST(? AS Array(Array(String))), indexOf(CAST(? AS Array(String)), finding_id)),
 foreign_request_keys = arrayElement(CAST(? AS Array(Array(String))), indexOf(CAST(? AS Array(String)), finding_id))
WHERE has(CAST(? AS Array(String)), finding_id)`
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
			if consumed > 0 && size+n > anForeignChunkBytes {
				break
			}
			size += n
			consumed++
			ids = append(ids, f.ID)
			tenants = append(tenants, anStrings(f.ForeignTenants))
			keys = append(keys, anStrings(f.ForeignRequestKeys))
		}
		if err := s.ExecDDL(ctx, q, tenants, ids, keys, ids, ids); err != nil {
			return fmt.Errorf("store foreign tenants of %d findings: %w", len(ids), err)
		}
		fs = fs[consumed:]
	}
	return nil
}

// anInsertFactLink records one link of requests (migration 0018); the
// times are nanoseconds, as the link's window and facts have them.
const anInsertFactLink = `INSERT INTO fact_links (version, window_from_ns, window_to_ns, first_ts_ns, last_ts_ns, facts,
 digest_lo, digest_hi, linked_at)
SELECT ?, ?, ?, ?, ?, ?, ?, ?, toDateTime(?)`

// SaveFactLink records what one link of requests saved to request_facts.
func (s *Store) SaveFactLink(ctx context.Context, l domain.FactLink) error {
	if err := s.Exec(ctx, anInsertFactLink, l.Version, unixNano(l.From), unixNano(l.To), unixNano(l.First),
		unixNano(l.Last), l.Digest.N, l.Digest.Lo, l.Digest.Hi, UnixArg(l.LinkedAt)); err != nil {
		return fmt.Errorf("record link of requests: %w", err)
	}
	return nil
}

// unixNano is t in nanoseconds since the epoch, 0 for the zero time or
// any time before the epoch.
func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return 0
	}
	return uint64(t.UnixNano())
}

const anLatestFactLinkSQL = `SELECT version, window_from_ns, window_to_ns, first_ts_ns, last_ts_ns, facts, digest_lo, digest_hi,
 toUInt32(linked_at)
FROM fact_links
ORDER BY version DESC
LIMIT 1`

// LatestFactLink returns the newest link of requests recorded (false when
// there is none).
func (s *Store) LatestFactLink(ctx context.Context) (domain.FactLink, bool, error) {
	rows, err := s.Query(ctx, anLatestFactLinkSQL)
	if err != nil {
		return domain.FactLink{}, false, fmt.Errorf("read latest link of requests: %w", err)
	}
	defer rows.Close()
	var l domain.FactLink
	found := false
	for rows.Next() {
		var from, to, first, last uint64
		var at uint32
		if err := rows.Scan(&l.Version, &from, &to, &first, &last, &l.Digest.N, &l.Digest.Lo, &l.Digest.Hi, &at); err != nil {
			return domain.FactLink{}, false, fmt.Errorf("scan link of requests: %w", err)
		}
		l.From, l.To = time.Unix(0, int64(from)).UTC(), time.Unix(0, int64(to)).UTC()
		l.First, l.Last = time.Unix(0, int64(first)).UTC(), time.Unix(0, int64(last)).UTC()
		l.LinkedAt = time.Unix(int64(at), 0).UTC()
		found = true
	}
	if err := rows.Err(); err != nil {
		return domain.FactLink{}, false, fmt.Errorf("read latest link of requests: %w", err)
	}
	return l, found, nil
}

// anLinkRowsSQL counts the rows of gateway-logged requests (a gateway
// request id; the rows of requests only engines logged have none) saved
// at a link's version and at later ones. A later row replaces the link's
// row of its request when the table merges; retention may have dropped
// some of the link's rows.
const anLinkRowsSQL = `SELECT countIf(version = ?), countIf(version > ?) FROM request_facts
WHERE version >= ? AND ts >= toDateTime(?) AND ts <= toDateTime(?) AND gateway_request_id != ''`

// LinkRows counts the request_facts rows of gateway-logged requests in
// [from, to] saved at version (at) and after it (later).
func (s *Store) LinkRows(ctx context.Context, version uint64, from, to time.Time) (at, later uint64, err error) {
	if err := s.QueryRow(ctx, anLinkRowsSQL, version, version, version, UnixArg(from), UnixArg(to)).Scan(&at, &later); err != nil {
		return 0, 0, fmt.Errorf("count the rows of a link of requests: %w", err)
	}
	return at, later, nil
}
