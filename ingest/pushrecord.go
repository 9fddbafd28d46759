package ingest

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/kvtrail/kvtrail/ingest/push"
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
		b = appendString(b, e.Line)
		b = appendString(b, e.Tenant)
		b = appendMap(b, e.Metadata)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendMap(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, m[k])
	}
	return b
}

var errCorruptRecord = errors.New("corrupt spooled push")

type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorruptRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errCorruptRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) byte1() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errCorruptRecord
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *recordReader) str() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errCorruptRecord
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// count reads a length that must fit in what is left (at least one byte
// per element), so a corrupt count cannot make us allocate gigabytes.
func (r *recordReader) count() int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = errCorruptRecord
	}
	return int(n)
}

func (r *recordReader) strMap() map[string]string {
	n := r.count()
	if n == 0 || r.err != nil {
		return nil
	}
	m := make(map[string]string, n)
	for i := 0; i < n && r.err == nil; i++ {
		k := r.str()
		m[k] = r.str()
	}
	return m
}

func decodeRecord(b []byte) (pushRecord, error) {
	if !bytes.HasPrefix(b, recordMagic) {
		var entries []push.Entry
		if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&entries); err != nil {
			return pushRecord{}, fmt.Errorf("decode spooled push: %w", err)
		}
		return pushRecord{entries: entries}, nil
	}
	r := &recordReader{b: b[len(recordMagic):]}
	var rec pushRecord
	if ns := r.varint(); ns != 0 {
		rec.arrival = time.Unix(0, ns).UTC()
	}
	sets := make([]map[string]string, r.count())
	for i := range sets {
		sets[i] = r.strMap()
		if sets[i] == nil {
			sets[i] = map[string]string{}
		}
	}
	rec.entries = make([]push.Entry, r.count())
	for i := range rec.entries {
		e := &rec.entries[i]
		j := r.uvarint()
		if r.err == nil && j >= uint64(len(sets)) {
			r.err = errCorruptRecord
		}
		if r.err != nil {
			break
		}
		e.Stream = sets[j]
		e.NoTS = r.byte1()&1 != 0
		e.Ts = time.Unix(0, r.varint()).UTC()
		e.Line = r.str()
		e.Tenant = r.str()
		e.Metadata = r.strMap()
	}
	if r.err != nil {
		return pushRecord{}, fmt.Errorf("decode spooled push: %w", r.err)
	}
	return rec, nil
}
