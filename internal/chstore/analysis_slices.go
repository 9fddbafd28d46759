package chstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/ch-go/proto"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chblock"
)

// The reads that let an analysis run slice by slice in bounded memory
// (analyze/slices.go): how the window's requests are spread over time,
// the endpoint votes the node map needs for the whole window, and the way
// back from request_facts (which every slice writes as it goes) to the
// requests a window-wide step needs again (victims, writers, the speed
// fit's points), without holding the window in Go.

// A count per bucket of ts: bucketCounts' statements are
// bucketsFrom + table + "\n" + its WHERE clause + bucketsBy; the WHERE
// takes from, to, then any more arguments.
const (
	bucketsFrom = `SELECT intDiv(toUInt32(ts), ?) AS b, count() FROM `
	bucketsBy   = `
GROUP BY b ORDER BY b`
)

const anRequestCountsSQL = bucketsFrom + `gateway_responses
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?)` + bucketsBy

// RequestCounts returns, in time order, the number of gateway responses in
// each step-long bucket (since the epoch, whole seconds) of [from, to].
func (s *Store) RequestCounts(ctx context.Context, from, to time.Time, step time.Duration) ([]domain.Bucket, error) {
	b, err := s.bucketCounts(ctx, anRequestCountsSQL, from, to, step)
	if err != nil {
		return nil, fmt.Errorf("count requests: %w", err)
	}
	return b, nil
}

// bucketCounts runs a count per step-long bucket, sql taking the step in
// seconds, from, to, then args.
func (s *Store) bucketCounts(ctx context.Context, sql string, from, to time.Time, step time.Duration, args ...any) ([]domain.Bucket, error) {
	sec := uint32(step / time.Second)
	if sec == 0 {
		return nil, fmt.Errorf("step %s is shorter than a second", step)
	}
	rows, err := s.Query(ctx, sql, append([]any{sec, UnixArg(from), UnixArg(to)}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []domain.Bucket
	for rows.Next() {
		var b uint32
		var n uint64
		if err := rows.Scan(&b, &n); err != nil {
			return nil, err
		}
		out = append(out, domain.Bucket{Start: time.Unix(int64(b)*int64(sec), 0).UTC(), N: n})
	}
	return out, rows.Err()
}

// cutByMinute cuts [from, to] into consecutive spans of at most perQuery
// rows each, counted per minute by countSQL (bucketCounts' arguments), for
// a read whose server memory grows with the rows one statement holds. The
// spans meet at minute starts: a second's rows, and so a row stored twice
// and not merged yet, are never split between two statements.
func (s *Store) cutByMinute(ctx context.Context, countSQL string, from, to time.Time, perQuery int, args ...any) ([]domain.Window, error) {
	per, err := s.bucketCounts(ctx, countSQL, from, to, time.Minute, args...)
	if err != nil {
		return nil, fmt.Errorf("rows per minute: %w", err)
	}
	return domain.CutWindow(per, domain.Window{From: from, To: to}, perQuery), nil
}

// closedArgs are a span's DateTime arguments for ts >= ? AND ts <= ?: a
// span but the last ends the second before the next one starts.
func closedArgs(spans []domain.Window, i int) []any {
	to := spans[i].To
	if i < len(spans)-1 {
		to = to.Add(-time.Second)
	}
	return []any{UnixArg(spans[i].From), UnixArg(to)}
}

const (
	anHostVotesWhere = `
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?) AND role = 'prefill' AND event = 'received' AND bootstrap_host != ''`
	anHostVotesSQL = `SELECT bootstrap_host, node, uniqExact(line_id) FROM engine_events` + anHostVotesWhere + `
GROUP BY bootstrap_host, node`
	anHostVoteLinesSQL = bucketsFrom + `engine_events` + anHostVotesWhere + bucketsBy
)

// hostVoteLinesPerQuery bounds the lines one vote statement counts:
// uniqExact holds each (host, node)'s distinct line ids until it ends,
// 219 MB over a window of incident scale 100's 9.9M requests on 18.16.
// Spans of whole seconds hold every copy of a line, so their counts add
// up to the window's.
var hostVoteLinesPerQuery = 8_000_000

// PrefillHostVotes counts, per bootstrap_host a prefill engine's own
// Receive lines name, the distinct lines of each node that logged it in
// [from, to] (whole seconds): which node a prefill host is.
func (s *Store) PrefillHostVotes(ctx context.Context, from, to time.Time) (map[string]map[string]int, error) {
	spans, err := s.cutByMinute(ctx, anHostVoteLinesSQL, from, to, hostVoteLinesPerQuery)
	if err != nil {
		return nil, fmt.Errorf("prefill host votes: %w", err)
	}
	out := map[string]map[string]int{}
	for i := range spans {
		if err := s.addHostVotes(ctx, closedArgs(spans, i), out); err != nil {
			return nil, fmt.Errorf("prefill host votes: %w", err)
		}
	}
	return out, nil
}

func (s *Store) addHostVotes(ctx context.Context, span []any, out map[string]map[string]int) error {
	rows, err := s.Query(ctx, anHostVotesSQL, span...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var host, node string
		var n uint64
		if err := rows.Scan(&host, &node, &n); err != nil {
			return err
		}
		if out[host] == nil {
			out[host] = map[string]int{}
		}
		out[host][node] += int(n)
	}
	return rows.Err()
}

// The facts one run saved (version at least the run's: a later run may
// have replaced a row since) in [from, to], found by key or by room, the
// lists sent as tables (lists.go). A key can have rows of several
// versions until merged; the newest wins.
const (
	anFactRefsSQL = `SELECT request_key, bootstrap_room, ts_ns, line_ids, version, tenant, model, decode_node, decode_dp_rank FROM request_facts
WHERE version >= ? AND ts >= toDateTime(?) AND ts <= toDateTime(?)
    AND (request_key GLOBAL IN ` + listKeys + ` OR bootstrap_room GLOBAL IN ` + listRooms + `)`
	anFactRefsOnDecodeSQL = `SELECT request_key, bootstrap_room, ts_ns, line_ids, version, tenant, model, decode_node, decode_dp_rank FROM request_facts
WHERE version >= ? AND ts >= toDateTime(?) AND ts <= toDateTime(?) AND decode_node = ? AND tenant != ''`
	// anOwnerRefsByRoomSQL reads by room alone, without the lines: the
	// owners of writer rooms need none (RoomOwnerRefs).
	anOwnerRefsByRoomSQL = `SELECT request_key, bootstrap_room, ts_ns, version, tenant, model, decode_node, decode_dp_rank FROM request_facts
WHERE version >= ? AND ts >= toDateTime(?) AND ts <= toDateTime(?) AND bootstrap_room GLOBAL IN ` + listRooms
)

// anListChunk bounds the values bound into one statement sent with the
// server's default max_query_size (256 KiB of query text): a 20-digit id
// with its separator is 22 bytes.
const anListChunk = 8_000

// RunFactRefs returns the saved facts of version >= version in [from, to]
// whose key is in keys or whose room is in rooms: key, room, time and the
// lines they were linked from (the way to rebuild them). One statement:
// neither filter can use request_facts' sort key, so every read scans the
// window.
func (s *Store) RunFactRefs(ctx context.Context, version uint64, from, to time.Time, keys []string, rooms []uint64) ([]domain.FactRef, error) {
	if len(keys) == 0 && len(rooms) == 0 {
		return nil, nil
	}
	acc := map[string]domain.FactRef{}
	lctx := withLists(ctx, keyList(listKeys, keys), idList(listRooms, rooms))
	if err := s.factRefs(lctx, acc, true, anFactRefsSQL, version, UnixArg(from), UnixArg(to)); err != nil {
		return nil, err
	}
	return sortedRefs(acc), nil
}

// RoomOwnerRefs is RunFactRefs by rooms alone, without the lines (Lines
// nil): what names the owner of a writer room. The reconstruction reads
// it for up to domain.IDsPerList writer rooms at once, whose lines it
// never used (docs/cluster.md, "What the analysis holds at scale 100").
func (s *Store) RoomOwnerRefs(ctx context.Context, version uint64, from, to time.Time, rooms []uint64) ([]domain.FactRef, error) {
	if len(rooms) == 0 {
		return nil, nil
	}
	acc := map[string]domain.FactRef{}
	lctx := withLists(ctx, idList(listRooms, rooms))
	if err := s.factRefs(lctx, acc, false, anOwnerRefsByRoomSQL, version, UnixArg(from), UnixArg(to)); err != nil {
		return nil, err
	}
	return sortedRefs(acc), nil
}

// DecodeFactRefs returns the saved facts (version >= version) in [from,
// to] decoded on node, with a tenant.
func (s *Store) DecodeFactRefs(ctx context.Context, version uint64, from, to time.Time, node string) ([]domain.FactRef, error) {
	acc := map[string]domain.FactRef{}
	if err := s.factRefs(ctx, acc, true, anFactRefsOnDecodeSQL, version, UnixArg(from), UnixArg(to), node); err != nil {
		return nil, err
	}
	return sortedRefs(acc), nil
}

// anDecodeReceiveLinesSQL: the decode-role Receive lines one node logged
// in a time range. The table's key is (node, ts, line_id), so the range
// is read, not the node's whole history.
const anDecodeReceiveLinesSQL = `SELECT DISTINCT line_id FROM engine_events
WHERE node = ? AND ts >= toDateTime(?) AND ts <= toDateTime(?) AND role = 'decode' AND event IN ('received', 'received_openai')
ORDER BY line_id`

// DecodeReceiveLines returns, sorted, the line ids of the decode-role
// Receive lines node logged in [from, to] (whole seconds): among a saved
// fact's lines, the one in this list is its decode side's Receive line,
// found without linking the fact again.
func (s *Store) DecodeReceiveLines(ctx context.Context, from, to time.Time, node string) ([]uint64, error) {
	rows, done, err := s.Stream(ctx, anDecodeReceiveLinesSQL, node, UnixArg(from), UnixArg(to))
	defer done()
	if err != nil {
		return nil, fmt.Errorf("read receive lines of %s: %w", node, err)
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("scan receive line of %s: %w", node, err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read receive lines of %s: %w", node, err)
	}
	return out, nil
}

// factRefs reads saved facts with query into acc, the newest version of
// each key; lines says whether query selects line_ids (after ts_ns).
func (s *Store) factRefs(ctx context.Context, acc map[string]domain.FactRef, lines bool, query string, args ...any) error {
	rows, done, err := s.Stream(ctx, query, args...)
	defer done()
	if err != nil {
		return fmt.Errorf("read saved request facts: %w", err)
	}
	defer rows.Close()
	// A read of facts names few tenants, models and nodes, each on many
	// rows: one copy of each is kept, not one a row.
	names := map[string]string{}
	intern := func(p *string) {
		if v, ok := names[*p]; ok {
			*p = v
		} else {
			names[*p] = *p
		}
	}
	var (
		r    domain.FactRef
		ns   uint64
		dest = []any{&r.Key, &r.Room, &ns, &r.Lines, &r.Version, &r.Tenant, &r.Model, &r.DecodeNode, &r.DecodeDPRank}
	)
	if !lines {
		dest = slices.Delete(dest, 3, 4)
	}
	for rows.Next() {
		r = domain.FactRef{}
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("scan saved request fact: %w", err)
		}
		intern(&r.Tenant)
		intern(&r.Model)
		intern(&r.DecodeNode)
		r.TS = time.Unix(0, int64(ns)).UTC()
		if old, ok := acc[r.Key]; !ok || r.Version > old.Version {
			acc[r.Key] = r
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read saved request facts: %w", err)
	}
	return nil
}

func sortedRefs(acc map[string]domain.FactRef) []domain.FactRef {
	out := make([]domain.FactRef, 0, len(acc))
	for _, r := range acc {
		out = append(out, r)
	}
	domain.SortFactRefs(out)
	return out
}

// The evidence rows with the given line ids (sent as a table, lists.go),
// in [from, to] (whole seconds; the time bound lets the server skip
// parts). The engine and gateway reads are unordered: their scans sort
// (sorted_rows.go).
const (
	anEngineByLinesSQL = `SELECT ts_ns, node, role, dp_rank, event, rid, bootstrap_room, prompt_tokens,
 completion_tokens, cached_tokens, finish_type, finish_message, status_code, line_id, msg_index
FROM engine_events
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?) AND line_id GLOBAL IN ` + listLines
	anTransferByLinesSQL = `SELECT ts_ns, node, role, dp_rank, source, event, rid, bootstrap_room, other_room, metadata_index,
 reason, peer, nic, line_id, msg_index
FROM transfer_events
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?) AND line_id GLOBAL IN ` + listLines + `
ORDER BY ts_ns, line_id, msg_index`
	anGatewayByLinesSQL = `SELECT ts_ns, request_id, tenant, model, status, prompt_tokens, completion_tokens, cached_tokens,
 ttft_ms, duration_ms, prefill_endpoint, decode_endpoint, bootstrap_room, prefill_rid, decode_rid, line_id
FROM gateway_responses
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?) AND line_id GLOBAL IN ` + listLines
)

// EvidenceByLines streams the gateway, engine and transfer rows whose line
// id is in ids and whose time is in [from, to]: the rows a saved request
// fact was linked from. A line stored twice (not merged yet) may come
// twice; callers link by room and line, which a repeat does not change.
func (s *Store) EvidenceByLines(ctx context.Context, from, to time.Time, ids []uint64, ev domain.EvidenceSink) error {
	if len(ids) == 0 {
		return nil
	}
	f, t := UnixArg(from), UnixArg(to)
	ctx = withLists(ctx, idList(listLines, ids))
	if err := s.scanGateway(ctx, anGatewayByLinesSQL, []any{f, t}, ev.Gateway); err != nil {
		return err
	}
	if err := s.scanEngine(ctx, anEngineByLinesSQL, []any{f, t}, ev.Engine); err != nil {
		return err
	}
	return s.scanTransfer(ctx, anTransferByLinesSQL, []any{f, t}, ev.Transfer)
}

// anSpeedPointsSQL: per request of a run (newest row of each key), what
// the impossible-speed fit reads. The server picks the rows, so memory in
// Go does not grow with the window. A sort and LIMIT 1 BY, not GROUP BY
// with an argMax per column: 0.47 s against 1.18 s for 200k keys on
// 18.16, and the sorted result streams in blocks.
const (
	anSpeedPointsSQL = `SELECT request_key, prefill_node, prompt_tokens, decode_prompt_tokens, cached_tokens, ttft_ms,
 status, ts_ns
FROM request_facts
WHERE version >= ? AND ts >= toDateTime(?) AND ts <= toDateTime(?) AND cityHash64(request_key) % ? = ?
ORDER BY request_key, version DESC
LIMIT 1 BY request_key`
	anSpeedPointsRowsSQL = `SELECT count() FROM request_facts WHERE version >= ? AND ts >= toDateTime(?) AND ts <= toDateTime(?)`
)

// speedPointsPerQuery bounds the rows one speed-point query sorts. The
// result streams in blocks, so this bounds the server, not the client
// (18.16 sent a GROUP BY's whole result as one block: at 10M requests,
// 1 GB in the client, when these reads grouped). Each query reads every
// row of the window to pick its keys by hash, so fewer, larger parts read
// less: at 9.87M requests on 18.16, one pass took 20 × 2.7 s with 0.5M
// rows a part (98 MB of server memory), 5 × 7.5 s with 2M (346 MB), and
// 34 s in one query (2.3 GB).
var speedPointsPerQuery uint64 = 2_000_000

// ScanSpeedPoints streams, for each request saved by a run of version >=
// version in [from, to], its prefill node and the gateway's numbers.
func (s *Store) ScanSpeedPoints(ctx context.Context, version uint64, from, to time.Time, fn func(domain.SpeedPoint) error) error {
	var n uint64
	if err := s.QueryRow(ctx, anSpeedPointsRowsSQL, version, UnixArg(from), UnixArg(to)).Scan(&n); err != nil {
		return fmt.Errorf("count speed points: %w", err)
	}
	parts := max(1, (n+speedPointsPerQuery-1)/speedPointsPerQuery)
	for part := uint64(0); part < parts; part++ {
		if err := s.scanSpeedPoints(ctx, version, from, to, parts, part, fn); err != nil {
			return err
		}
	}
	return nil
}

// anSpeedSuspectsSQL: anSpeedPointsSQL's rows (the newest of each key)
// for the keys that have a row under its node's impossible-speed bound
// (domain.SpeedBounds; a key whose newest row is under it is among them).
// The bound is tested as the rows are read, so the server sorts only the
// few keys under it, where the judge's read of every point sorted the
// window's keys and sent every row to kvtrail. The bound is widened by
// speedSuspectSlack, so a point exactly on it is read and the Go judge,
// whose arithmetic may round differently, decides. GLOBAL IN: on a
// cluster the keys are found once over request_facts and sent to the
// shards.
const anSpeedSuspectsSQL = `SELECT request_key, prefill_node, prompt_tokens, decode_prompt_tokens, cached_tokens, ttft_ms,
 status, ts_ns
FROM request_facts
WHERE version >= ? AND ts >= toDateTime(?) AND ts <= toDateTime(?) AND request_key GLOBAL IN (
 SELECT request_key FROM (
  SELECT request_key, ttft_ms,
   toFloat64(greatest(prompt_tokens, decode_prompt_tokens)) - toFloat64(cached_tokens) AS u,
   transform(toString(prefill_node), ?, ?, cast(0, 'Float64')) + transform(toString(prefill_node), ?, ?, cast(0, 'Float64')) * u AS want,
   transform(toString(prefill_node), ?, ?, cast(0, 'Float64')) AS margin
  FROM request_facts
  WHERE version >= ? AND ts >= toDateTime(?) AND ts <= toDateTime(?) AND status = 200 AND ttft_ms > 0
   AND cached_tokens <= greatest(prompt_tokens, decode_prompt_tokens) AND has(?, toString(prefill_node)))
 WHERE u >= ? AND ttft_ms < least(want - margin, ? * want) + ?)
ORDER BY request_key, version DESC
LIMIT 1 BY request_key`

// speedSuspectSlack (ms) widens the store's test of a bound. Both sides
// compute the same floating-point operations, but Go may fuse a multiply
// and an add on some platforms; the difference that can make is far below
// a hundredth of a millisecond, and the points it admits beyond the bound
// are only those that close to it.
const speedSuspectSlack = 0.01

// ScanSpeedSuspects streams ScanSpeedPoints' points that may lie under
// their node's bound in b: every point under it, and perhaps a few within
// speedSuspectSlack of it, which the caller judges again
// (domain.SpeedBounds.Under).
func (s *Store) ScanSpeedSuspects(ctx context.Context, version uint64, from, to time.Time, b domain.SpeedBounds, fn func(domain.SpeedPoint) error) error {
	if len(b.Nodes) == 0 {
		return nil
	}
	n := len(b.Nodes)
	nodes, icpt, slope, margin := make([]string, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, x := range b.Nodes {
		nodes[i], icpt[i], slope[i], margin[i] = x.Node, x.Intercept, x.Slope, x.Margin
	}
	f, t := UnixArg(from), UnixArg(to)
	args := []any{version, f, t, nodes, icpt, nodes, slope, nodes, margin, version, f, t, nodes,
		float64(b.MinUncached), b.Ratio, speedSuspectSlack}
	return s.scanSpeedRows(ctx, anSpeedSuspectsSQL, args, fn)
}

// speedCols are the columns of anSpeedPointsSQL, in its order; the
// prefill node is one of a few, shared rather than copied.
type speedCols struct {
	key, node                    chblock.Str
	prompt, decodePrompt, cached proto.ColUInt64
	ttft                         proto.ColFloat64
	status                       proto.ColUInt16
	ts                           proto.ColUInt64
}

func (c *speedCols) results() proto.Results {
	return proto.Results{
		{Name: "request_key", Data: &c.key}, {Name: "prefill_node", Data: &c.node},
		{Name: "prompt_tokens", Data: &c.prompt}, {Name: "decode_prompt_tokens", Data: &c.decodePrompt},
		{Name: "cached_tokens", Data: &c.cached}, {Name: "ttft_ms", Data: &c.ttft},
		{Name: "status", Data: &c.status}, {Name: "ts_ns", Data: &c.ts},
	}
}

// scanSpeedPoints streams the speed points whose key hashes to part of
// parts. The fit reads the window's points twice, so at scale these are
// the analysis's largest reads after the slices': a block at a time.
func (s *Store) scanSpeedPoints(ctx context.Context, version uint64, from, to time.Time, parts, part uint64, fn func(domain.SpeedPoint) error) error {
	return s.scanSpeedRows(ctx, anSpeedPointsSQL, []any{version, UnixArg(from), UnixArg(to), parts, part}, fn)
}

// scanSpeedRows streams the rows of a select of speedCols' columns.
func (s *Store) scanSpeedRows(ctx context.Context, query string, args []any, fn func(domain.SpeedPoint) error) error {
	var c speedCols
	err := s.scanBlocks(ctx, query, args, c.results(), func(n int) error {
		for i := range n {
			p := domain.SpeedPoint{
				Key: c.key.Row(i), PrefillNode: c.node.Row(i), Prompt: c.prompt[i], DecodePrompt: c.decodePrompt[i],
				Cached: c.cached[i], TTFTMs: c.ttft[i], Status: c.status[i], TS: time.Unix(0, int64(c.ts[i])).UTC(),
			}
			if err := fn(p); err != nil {
				return errCallback{err}
			}
		}
		return nil
	})
	return callbackOr(err, "read speed points")
}
