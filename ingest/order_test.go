package ingest_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// orderStore records, for every INSERT into raw_lines and batch_stats,
// the (node, ts, line_id) keys and source_refs of the rows appended, in
// the order they were sent.
type orderStore struct {
	*chstore.Store
	mu      sync.Mutex
	inserts []*keyLog
}

type keyLog struct {
	table string
	keys  []sentKey
	refs  map[uint64]bool
}

type sentKey struct {
	node   string
	ts     int64
	lineID uint64
}

func (s *orderStore) OpenInsert(ctx context.Context, table string, cols []string) (ingest.TableWriter, error) {
	x, err := s.Store.OpenInsert(ctx, table, cols)
	if err != nil || (table != "raw_lines" && table != "batch_stats") {
		return x, err
	}
	l := &keyLog{table: table, refs: map[uint64]bool{}}
	s.mu.Lock()
	s.inserts = append(s.inserts, l)
	s.mu.Unlock()
	return &orderWriter{TableWriter: x, log: l, at: slices.Index(cols, "ts"), node: slices.Index(cols, "node"),
		id: slices.Index(cols, "line_id"), ref: slices.Index(cols, "source_ref")}, nil
}

type orderWriter struct {
	ingest.TableWriter
	log               *keyLog
	at, node, id, ref int
}

func (w *orderWriter) AppendColumns(cols ...any) error {
	ts, nodes, ids := cols[w.at].([]time.Time), cols[w.node].([]string), cols[w.id].([]uint64)
	for i := range ts {
		w.log.keys = append(w.log.keys, sentKey{nodes[i], ts[i].Unix(), ids[i]})
	}
	if w.ref >= 0 {
		for _, r := range cols[w.ref].([]uint64) {
			w.log.refs[r] = true
		}
	}
	return w.TableWriter.AppendColumns(cols...)
}

func (k sentKey) less(o sentKey) bool {
	if k.node != o.node {
		return k.node < o.node
	}
	if k.ts != o.ts {
		return k.ts < o.ts
	}
	return k.lineID < o.lineID
}

// denseLog writes n decode-batch lines, perSecond of them in each second,
// in the shape of a real SGLang line (ingest/parse/testdata/corpus/
// sglang-22331.log, from sgl-project/sglang#22331, v0.5.10):
// lines of one second get ids (hashes of their offsets) in no order, and
// chunk ends fall inside seconds.
func denseLog(t *testing.T, path string, n, perSecond int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	start := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		ts := start.Add(time.Duration(i/perSecond) * time.Second)
		fmt.Fprintf(w, "[%s TP0] Decode batch, #running-req: %d, #token: %d, token usage: 0.29, cuda graph: True, gen throughput (token/s): 144.95, #queue-req: 0\n",
			ts.Format("2006-01-02 15:04:05"), i%50, 1000+i)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Each large source's rows reach the key-ordered tables in an INSERT of
// their own, in the tables' (node, ts, line_id) order, so ClickHouse
// writes their blocks without sorting them; the rows stored are the same.
func TestLargeSourcesArriveInTableOrder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const lines = 30_000
	var srcs []ingest.Source
	for _, node := range []string{"decode-1", "decode-0"} {
		p := filepath.Join(dir, node+".log")
		denseLog(t, p, lines, 7)
		srcs = append(srcs, ingest.Source{Path: p, Node: node, Role: "decode", Format: "sglang"})
	}
	s := &orderStore{Store: testdb.New(t)}
	sum, err := ingest.New(s, ingest.Options{WindowRecords: 25_000}).Ingest(ctx, srcs)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total.Records != 2*lines {
		t.Fatalf("%d records read, want %d", sum.Total.Records, 2*lines)
	}
	sorted := map[string]int{}
	for _, l := range s.inserts {
		if len(l.keys) == 0 {
			continue
		}
		if l.table == "raw_lines" && len(l.refs) != 1 {
			t.Errorf("a raw_lines INSERT of %d rows holds %d sources", len(l.keys), len(l.refs))
			continue
		}
		for i := 1; i < len(l.keys); i++ {
			if l.keys[i].less(l.keys[i-1]) {
				t.Fatalf("%s INSERT of %d rows: row %d %+v sent after %+v", l.table, len(l.keys), i, l.keys[i], l.keys[i-1])
			}
		}
		sorted[l.table] += len(l.keys)
	}
	for _, table := range []string{"raw_lines", "batch_stats"} {
		if sorted[table] != 2*lines {
			t.Errorf("%s: %d rows sent in order, want all %d", table, sorted[table], 2*lines)
		}
		if n := count(t, s.Store, "SELECT count() FROM (SELECT DISTINCT node, line_id FROM "+table+")"); n != 2*lines {
			t.Errorf("%s holds %d distinct lines, want %d", table, n, 2*lines)
		}
	}
}
