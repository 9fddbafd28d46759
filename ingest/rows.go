package ingest

import (
	"hash/fnv"
	"sort"
	"strconv"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// LineID is the stable evidence reference of a record: FNV-64a of the
// source's stream (for files: node + digest of the first block, see
// identity.go) and the record's byte offset. Re-ingesting the same bytes
// yields the same id, which is what makes ingest idempotent.
func LineID(sourceID string, offset int64) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(sourceID))
	var b [9]byte
	b[0] = ':'
	for i := 0; i < 8; i++ {
		b[i+1] = byte(offset >> (8 * i))
	}
	_, _ = h.Write(b[:])
	return h.Sum64()
}

type rawRow struct {
	ts         time.Time
	node, role string
	format     string
	// source and digest name the line's source in its line_sources row;
	// the line itself carries ref (SourceRef of node, source, digest).
	source string
	digest string
	ref    uint64
	offset uint64
	lineNo uint64
	lineID uint64
	kind   string
	status string
	reason string
	rid    string
	room   uint64
	line   string
	// attrKeys/attrValues: labels and structured metadata of pushed entries.
	attrKeys, attrValues []string
}

type idRow struct {
	id, kind, node string
	ts             time.Time
	lineID         uint64
}

type bootRow struct {
	node, role string
	f          parse.BootFacts
	lineIDs    []uint64
}

type engineRow struct {
	ts         time.Time
	node, role string
	e          *parse.EngineEvent
	lineID     uint64
	msgIndex   uint8 // the message's place in a glued record (msg_index)
}

type batchRow struct {
	ts         time.Time
	node, role string
	b          *parse.BatchStat
	lineID     uint64
	msgIndex   uint8 // the message's place in a glued record (msg_index)
}

type transferRow struct {
	ts         time.Time
	node, role string
	t          *parse.TransferEvent
	lineID     uint64
	msgIndex   uint8 // the message's place in a glued record (msg_index)
}

type gatewayRow struct {
	ts     time.Time
	node   string
	g      *parse.GatewayResponse
	lineID uint64
}

type metricRow struct {
	node   string
	m      parse.MetricSample
	source string
}

type pageRow struct {
	ts       time.Time
	node     string
	p        *parse.PageEvent
	lineID   uint64
	msgIndex uint8 // the message's place in a glued record (msg_index)
}

// Batch holds the rows of a run of consecutive records of one source.
type Batch struct {
	raw      []rawRow
	ids      []idRow
	boots    []bootRow
	engine   []engineRow
	batches  []batchRow
	transfer []transferRow
	gateway  []gatewayRow
	metrics  []metricRow
	pages    []pageRow
	// bytes is the size of the raw text, for the flush threshold.
	bytes int
}

// Len is the number of records in the batch.
func (b *Batch) Len() int { return len(b.raw) }

// reset empties b, keeping its capacity. Rows are cleared first so the
// backing arrays do not pin the previous batch's strings.
func (b *Batch) reset() {
	clear(b.raw)
	clear(b.ids)
	clear(b.boots)
	clear(b.engine)
	clear(b.batches)
	clear(b.transfer)
	clear(b.gateway)
	clear(b.metrics)
	clear(b.pages)
	*b = Batch{
		raw: b.raw[:0], ids: b.ids[:0], boots: b.boots[:0], engine: b.engine[:0], batches: b.batches[:0],
		transfer: b.transfer[:0], gateway: b.gateway[:0], metrics: b.metrics[:0], pages: b.pages[:0],
	}
}

// cutBefore reports whether a record at ts should open the next chunk
// rather than join b: b is full and ts starts a new second, or b holds
// twice the bounds whatever the times. raw_lines and the event tables are
// ordered by (node, ts, line_id) with ts in whole seconds, and line ids
// are hashes; a chunk that ends where a second does, sorted (sortByKey),
// follows its source's previous chunk in that order. The server then finds
// each block of a source's rows already sorted and writes it without the
// sort's copy of every column (most of its page faults, measured on 18.16).
func (b *Batch) cutBefore(ts time.Time) bool {
	n := len(b.raw)
	switch {
	case n == 0:
		return false
	case n >= 2*chunkRecords || b.bytes >= 2*chunkBytes:
		return true
	case b.full():
		return dateTime(ts) != dateTime(b.raw[n-1].ts)
	}
	return false
}

// full reports whether b holds a chunk's worth of records or text.
func (b *Batch) full() bool { return len(b.raw) >= chunkRecords || b.bytes >= chunkBytes }

// sortByKey orders the rows of the tables sorted by (node, ts, line_id)
// in that order (ts as the DateTime column holds it). Rows of one record
// keep their relative order, which is their msg_index order, the last
// column of the event tables' keys (migration 0017); nothing else depends
// on the order of a batch's rows.
func (b *Batch) sortByKey() {
	sortRows(b.raw, func(r *rawRow) rowKey { return rowKey{r.node, dateTime(r.ts), r.lineID} })
	sortRows(b.engine, func(r *engineRow) rowKey { return rowKey{r.node, dateTime(r.ts), r.lineID} })
	sortRows(b.batches, func(r *batchRow) rowKey { return rowKey{r.node, dateTime(r.ts), r.lineID} })
	sortRows(b.transfer, func(r *transferRow) rowKey { return rowKey{r.node, dateTime(r.ts), r.lineID} })
}

// keyOrdered lists the tables sortByKey sorts a batch's rows for.
var keyOrdered = map[string]bool{"raw_lines": true, "engine_events": true, "batch_stats": true, "transfer_events": true}

// rowKey is a row's (node, ts, line_id) sorting key.
type rowKey struct {
	node   string
	sec    int64
	lineID uint64
}

// before orders keys by node and second only.
func (k rowKey) before(o rowKey) bool {
	if k.node != o.node {
		return k.node < o.node
	}
	return k.sec < o.sec
}

func (k rowKey) less(o rowKey) bool {
	if k.node != o.node || k.sec != o.sec {
		return k.before(o)
	}
	return k.lineID < o.lineID
}

// keyedRows sorts rows in place by key without copying them for each
// comparison (the rows are a few hundred bytes).
type keyedRows[T any] struct {
	rows []T
	key  func(*T) rowKey
}

func (k keyedRows[T]) Len() int           { return len(k.rows) }
func (k keyedRows[T]) Less(i, j int) bool { return k.key(&k.rows[i]).less(k.key(&k.rows[j])) }
func (k keyedRows[T]) Swap(i, j int)      { k.rows[i], k.rows[j] = k.rows[j], k.rows[i] }

// sortRows sorts rows by key, stably. A source's rows come in time
// order, so they are runs of one (node, second), the runs in order and
// each in line-id (hash) order: each run is sorted on its own by
// insertion, a few rows at a time. Runs out of order (timestamps going
// back) or long runs are sorted as a whole.
func sortRows[T any](rows []T, key func(*T) rowKey) {
	k := keyedRows[T]{rows, key}
	for lo := 0; lo < len(rows); {
		first := key(&rows[lo])
		hi := lo + 1
		for ; hi < len(rows); hi++ {
			next := key(&rows[hi])
			if next.node != first.node || next.sec != first.sec {
				if next.before(first) {
					sort.Stable(k)
					return
				}
				break
			}
		}
		if hi-lo > 32 {
			sort.Stable(keyedRows[T]{rows[lo:hi], key})
		} else {
			for i := lo + 1; i < hi; i++ {
				for j := i; j > lo && k.Less(j, j-1); j-- {
					k.Swap(j, j-1)
				}
			}
		}
		lo = hi
	}
}

// dateTime is t in the seconds a DateTime column stores (chTime).
func dateTime(t time.Time) int64 { return min(max(t.Unix(), 0), maxDateTimeUnix) }

var maxDateTimeUnix = maxDateTime.Unix()

// addIDs indexes a record's join keys for id lookups.
func (b *Batch) addIDs(node string, ts time.Time, lineID uint64, rid string, room uint64, requestID string) {
	if rid != "" {
		b.ids = append(b.ids, idRow{id: rid, kind: "rid", node: node, ts: ts, lineID: lineID})
	}
	if room != 0 {
		b.ids = append(b.ids, idRow{id: strconv.FormatUint(room, 10), kind: "room", node: node, ts: ts, lineID: lineID})
	}
	if requestID != "" {
		b.ids = append(b.ids, idRow{id: requestID, kind: "request_id", node: node, ts: ts, lineID: lineID})
	}
}

// tsNS is ts in nanoseconds since the epoch, 0 before it (ClickHouse
// DateTime cannot hold earlier times anyway).
func tsNS(t time.Time) uint64 {
	if t.Before(time.Unix(0, 0)) {
		return 0
	}
	return uint64(t.UnixNano())
}

// chTime clamps a time into DateTime's range (1970..2105).
func chTime(t time.Time) time.Time {
	if t.Before(time.Unix(0, 0)) {
		return time.Unix(0, 0).UTC()
	}
	if t.After(maxDateTime) {
		return maxDateTime
	}
	return t.UTC()
}

var maxDateTime = time.Date(2105, 12, 31, 0, 0, 0, 0, time.UTC)
