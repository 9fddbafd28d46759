package analyze

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/simtest"
	"github.com/kvtrail/kvtrail/simulate"
)

// A gateway whose request ids clients supply, and reuse: a clean
// simulated day with each two consecutive responses of a gateway log
// given one id when they are a minute apart or less (a reuse farther
// apart than the slices' context is not seen: TestCorrelateReusedRequestIDs). Every response stays its own request in request_facts,
// after ingest's link, an analysis of the whole window and one in slices,
// all three alike (they were saved as one row a tenant before).
func TestReusedRequestIDsFromLogs(t *testing.T) {
	ctx := t.Context()
	src, _ := simulated(t, simulate.Config{Scenario: "clean", Seed: 7, Scale: 0.05, Days: 1})
	responses := 0
	dir := simtest.Rewrite(t, src, t.TempDir(), func(rel string, b []byte) ([]byte, error) {
		if !strings.HasPrefix(filepath.Base(rel), "gateway-") {
			return b, nil
		}
		return reuseIDs(b, filepath.Base(rel), &responses)
	})
	db := ingested(t, dir)
	// The link kvtrail ingest runs after its lines.
	from, to, _, err := DataSpan(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&Runner{DB: db, Cfg: DefaultConfig(), Trigger: "test"}).Correlate(ctx, Window{From: from, To: to.Add(time.Second)}, 0); err != nil {
		t.Fatal(err)
	}
	// The gateway-logged rows: how many, how many keys, and a digest of
	// their keys and links.
	const facts = `SELECT count(), uniqExact(request_key), sum(cityHash64(request_key, tenant, bootstrap_room, prefill_node, prefill_rid,
 decode_node, decode_rid, arrayStringConcat(arrayMap(x -> toString(x), line_ids), ','))) FROM request_facts FINAL WHERE gateway_request_id != ''`
	var n0, k0, h0 uint64
	if err := db.QueryRow(ctx, facts).Scan(&n0, &k0, &h0); err != nil {
		t.Fatal(err)
	}
	if int(n0) != responses || int(k0) != responses {
		t.Fatalf("after ingest's link: %d rows, %d keys for %d gateway responses", n0, k0, responses)
	}
	for i, slice := range []int{0, 300} {
		cfg := DefaultConfig()
		cfg.SliceRequests = slice
		r := &Runner{DB: db, Cfg: cfg, Trigger: "test", NoAdopt: true, Now: func() time.Time { return testNow.Add(time.Duration(i) * time.Minute) }}
		rep, err := r.Run(ctx, Window{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if slice > 0 && rep.Slices < 2 {
			t.Fatalf("%d slices of %d requests: the sliced run is not sliced", rep.Slices, slice)
		}
		var n, k, h uint64
		if err := db.QueryRow(ctx, facts).Scan(&n, &k, &h); err != nil {
			t.Fatal(err)
		}
		if n != n0 || k != k0 || h != h0 {
			t.Errorf("after an analysis in slices of %d: %d rows, %d keys (%x); after ingest's link %d, %d (%x)", slice, n, k, h, n0, k0, h0)
		}
	}
	// The reads after the slices link a saved request again from its own
	// lines, without the response that reused its id: it keeps its key.
	rows, err := db.Query(ctx, `SELECT DISTINCT request_key FROM request_facts WHERE position(request_key, '#') > 0 ORDER BY request_key LIMIT 20`)
	if err != nil {
		t.Fatal(err)
	}
	var reused []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		reused = append(reused, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(reused) < 2 {
		t.Fatalf("%d requests keyed by id and line: the read-back proves nothing", len(reused))
	}
	wd, err := (&Runner{DB: db, Cfg: DefaultConfig()}).prepare(ctx, Window{}, true)
	if err != nil {
		t.Fatal(err)
	}
	var back []string
	err = wd.readBack(ctx, reused[:1], nil, func(string) bool { return false }, nil, func(f *Fact) { back = append(back, f.Key) })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back, reused[:1]) {
		t.Errorf("read back %v, want %v", back, reused[:1])
	}
}

// reuseIDs rewrites a gateway log's request ids: each two consecutive
// responses a minute apart or less share one; it counts the responses.
func reuseIDs(log []byte, name string, responses *int) ([]byte, error) {
	var gs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var g map[string]any
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			return nil, err
		}
		gs = append(gs, g)
	}
	ts := func(g map[string]any) time.Time {
		t, _ := time.Parse(time.RFC3339Nano, g["ts"].(string))
		return t
	}
	var out bytes.Buffer
	for i, g := range gs {
		g["request_id"] = fmt.Sprintf("%s-req-%d", name, i)
		if i%2 == 1 && ts(g).Sub(ts(gs[i-1])) <= time.Minute {
			g["request_id"] = gs[i-1]["request_id"]
		}
		line, err := json.Marshal(g)
		if err != nil {
			return nil, err
		}
		out.Write(append(line, '\n'))
		*responses++
	}
	return out.Bytes(), sc.Err()
}
