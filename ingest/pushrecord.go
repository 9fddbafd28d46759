package ingest

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/kvtrail/kvtrail/ingest/push"
	"github.com/kvtrail/kvtrail/internal/varbin"
)

// A spooled push is one spool record. The current form is compact and
// cheap to decode (the drain reads tens of thousands of them a second):
//
//	magic "\xffKV2" | arrival unix ns (varint) | label sets | entries
//
// label sets: count, then per set its labels (count, name, value);
// entries: count, then per entry: set index, flags (bit 0: no ts), ts unix
// ns (varint), line, tenant, metadata (count, name, value). Strings are
// uvarint length + bytes, so invalid UTF-8 survives. Records written by
// older kvtrail versions are gob-encoded []push.Entry and still decode.
var recordMagic = []byte("\xffKV2")

// pushRecord is a decoded spool record: one push.
type pushRecord struct {
	arrival time.Time // when kvtrail received it; zero for old records
	entries []push.Entry
	// sets are the distinct label sets (labelString form) and set[i] the
	// one of entries[i], so per-stream work is done once per set.
	sets []string
	set  []int
}

// indexSets fills rec.sets and rec.set from the entries.
func (rec *pushRecord) indexSets() {
	idx := map[string]int{}
	rec.sets, rec.set = rec.sets[:0], make([]int, len(rec.entries))
	var last map[string]string
	lastIdx := -1
	for i := range rec.entries {
		m := rec.entries[i].Stream
		if lastIdx >= 0 && sameMap(m, last) {
			rec.set[i] = lastIdx
			continue
		}
		k := labelString(m)
		j, ok := idx[k]
		if !ok {
			j = len(rec.sets)
			idx[k] = j
			rec.sets = append(rec.sets, k)
		}
		rec.set[i], last, lastIdx = j, m, j
	}
}

// sameMap reports whether a and b are the same map (not equal contents):
// entries of one stream share their label map.
func sameMap(a, b map[string]string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return len(a) == len(b) && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func encodeRecord(arrival time.Time, entries []push.Entry) []byte {
	size := 64
	for i := range entries {
		size += len(entries[i].Line) + 24
	}
	b := make([]byte, 0, size)
	b = append(b, recordMagic...)
	b = binary.AppendVarint(b, arrival.UnixNano())
	// Entries of one stream usually share one label map; NDJSON builds a
	// map per line, so sets are deduplicated by content.
	setIdx := map[string]int{}
	idx := make([]int, len(entries))
	var sets []map[string]string
	for i := range entries {
		if i > 0 && sameMap(entries[i].Stream, entries[i-1].Stream) {
			idx[i] = idx[i-1]
			continue
		}
		k := labelString(entries[i].Stream)
		j, ok := setIdx[k]
		if !ok {
			j = len(sets)
			setIdx[k] = j
			sets = append(sets, entries[i].Stream)
		}
		idx[i] = j
	}
	b = binary.AppendUvarint(b, uint64(len(sets)))
	for _, m := range sets {
		b = appendMap(b, m)
	}
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for i := range entries {
		e := &entries[i]
		b = binary.AppendUvarint(b, uint64(idx[i]))
		var flags byte
		if e.NoTS {
			flags |= 1
		}
		b = append(b, flags)
		b = binary.AppendVarint(b, e.Ts.UnixNano())
		b = varbin.AppendString(b, e.Line)
		b = varbin.AppendString(b, e.Tenant)
		b = appendMap(b, e.Metadata)
	}
	return b
}

func appendMap(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = varbin.AppendString(b, k)
		b = varbin.AppendString(b, m[k])
	}
	return b
}

var errCorruptRecord = errors.New("corrupt spooled push")

// readMap reads what appendMap wrote.
func readMap(r *varbin.Reader) map[string]string {
	n := r.Count(2) // a name and a value, each at least a length byte
	if n == 0 || r.Err != nil {
		return nil
	}
	m := make(map[string]string, n)
	for i := 0; i < n && r.Err == nil; i++ {
		k := r.Str()
		m[k] = r.Str()
	}
	return m
}

func decodeRecord(b []byte) (pushRecord, error) {
	if !bytes.HasPrefix(b, recordMagic) {
		var entries []push.Entry
		if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&entries); err != nil {
			return pushRecord{}, fmt.Errorf("decode spooled push: %w", err)
		}
		rec := pushRecord{entries: entries}
		rec.indexSets()
		return rec, nil
	}
	r := varbin.NewReader(b[len(recordMagic):], errCorruptRecord)
	var rec pushRecord
	if ns := r.Varint(); ns != 0 {
		rec.arrival = time.Unix(0, ns).UTC()
	}
	sets := make([]map[string]string, r.Count(1))
	rec.sets = make([]string, len(sets))
	for i := range sets {
		sets[i] = readMap(r)
		if sets[i] == nil {
			sets[i] = map[string]string{}
		}
		rec.sets[i] = labelString(sets[i])
	}
	// An entry is at least 6 bytes: set, flags, ts, line, tenant, metadata.
	rec.entries = make([]push.Entry, r.Count(6))
	rec.set = make([]int, len(rec.entries))
	for i := range rec.entries {
		e := &rec.entries[i]
		j := r.Uvarint()
		if r.Err == nil && j >= uint64(len(sets)) {
			r.Err = errCorruptRecord
		}
		if r.Err != nil {
			break
		}
		e.Stream, rec.set[i] = sets[j], int(j)
		e.NoTS = r.Byte()&1 != 0
		e.Ts = time.Unix(0, r.Varint()).UTC()
		e.Line = r.Str()
		e.Tenant = r.Str()
		e.Metadata = readMap(r)
	}
	if r.Err != nil {
		return pushRecord{}, fmt.Errorf("decode spooled push: %w", r.Err)
	}
	return rec, nil
}
