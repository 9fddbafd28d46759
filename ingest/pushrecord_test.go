package ingest

import (
	"bytes"
	"encoding/gob"
	"reflect"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest/push"
)

func recordEntries() []push.Entry {
	a := map[string]string{"node": "n1", "role": "prefill", "job": "x\xff"}
	b := map[string]string{"node": "n2"}
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 123, time.UTC)
	return []push.Entry{
		{Stream: a, Ts: t0, Line: "one", Tenant: "t"},
		{Stream: a, Ts: t0.Add(time.Second), Line: "two \xfe invalid utf8", Metadata: map[string]string{"rid": "r1"}, Tenant: "t"},
		{Stream: b, Ts: t0, Line: "", NoTS: true, Tenant: "t"},
		{Stream: map[string]string{"node": "n1", "role": "prefill", "job": "x\xff"}, Ts: time.Unix(0, 0).UTC(), Line: "same labels, other map"},
	}
}

// A spooled push decodes to exactly what was accepted (invalid UTF-8,
// metadata, tenant and the no-timestamp flag included), and records of
// older versions (gob) still decode.
func TestPushRecordRoundTrip(t *testing.T) {
	in := recordEntries()
	arrival := time.Date(2026, 7, 1, 0, 0, 5, 0, time.UTC)
	rec, err := decodeRecord(encodeRecord(arrival, in))
	if err != nil {
		t.Fatal(err)
	}
	if !rec.arrival.Equal(arrival) || !reflect.DeepEqual(rec.entries, in) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", rec.entries, in)
	}
	if len(rec.sets) != 2 || rec.set[0] != rec.set[3] || rec.set[0] == rec.set[2] {
		t.Errorf("label sets %v / %v: want entries 0, 1, 3 in one set", rec.sets, rec.set)
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(in); err != nil {
		t.Fatal(err)
	}
	old, err := decodeRecord(buf.Bytes())
	if err != nil || len(old.entries) != len(in) || old.entries[1].Line != in[1].Line || len(old.sets) != 2 {
		t.Fatalf("gob record: %v %+v", err, old)
	}
}

// A corrupt record is an error, never a panic or a huge allocation.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(time.Unix(1, 0), recordEntries()))
	f.Add([]byte("\xffKV2\x00\xff\xff\xff\xff\x0f"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeRecord(b)
		if err == nil && len(rec.set) != len(rec.entries) {
			t.Fatalf("decoded %d entries with %d set indexes", len(rec.entries), len(rec.set))
		}
	})
}
