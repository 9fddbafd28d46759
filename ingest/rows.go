package ingest

import (
	"hash/fnv"
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
}

type batchRow struct {
	ts         time.Time
	node, role string
	b          *parse.BatchStat
	lineID     uint64
}

type transferRow struct {
	ts         time.Time
	node, role string
	t          *parse.TransferEvent
	lineID     uint64
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
	ts     time.Time
	node   string
	p      *parse.PageEvent
	lineID uint64
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
