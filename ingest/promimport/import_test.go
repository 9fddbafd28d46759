package promimport

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// The generated cluster: two SGLang servers, 30 s samples over 2 h.
const (
	genStep   = 30 * time.Second
	genPoints = 241 // 2 h inclusive
)

var genInstances = []struct{ instance, role string }{
	{"10.0.1.1:30000", "prefill"},
	{"10.0.1.2:30000", "decode"},
}

// genMetric is one metric family and its value at sample i of instance n.
type genMetric struct {
	name, typ string
	value     func(n, i int) float64
}

var genMetrics = []genMetric{
	// The decode node restarts with a smaller KV pool after one hour: the
	// forensic question "what was the pool when request X ran" depends on it.
	{"sglang:max_total_num_tokens", "gauge", func(n, i int) float64 {
		if n == 1 && i >= 120 {
			return 200000
		}
		return float64(500000 - 250000*n)
	}},
	{"sglang:context_len", "gauge", func(int, int) float64 { return 40960 }},
	// Fractional, with one NaN (a scrape of an idle pool) to check NaN
	// survives Prometheus' JSON and ClickHouse.
	{"sglang:token_usage", "gauge", func(n, i int) float64 {
		if n == 1 && i == 10 {
			return math.NaN()
		}
		return float64((i*7+n*13)%100) / 100
	}},
	{"sglang:num_transfer_failed_reqs", "counter", func(n, i int) float64 { return float64(i / (5 + n)) }},
}

func sampleName(m genMetric) string {
	if m.typ == "counter" {
		return m.name + "_total"
	}
	return m.name
}

// genOpenMetrics renders the cluster as promtool's backfill input:
// timestamps in seconds, every sample timestamped, "# EOF" at the end.
func genOpenMetrics(t0 time.Time) []byte {
	var b strings.Builder
	for _, m := range genMetrics {
		fmt.Fprintf(&b, "# TYPE %s %s\n", m.name, m.typ)
		for n, in := range genInstances {
			for i := 0; i < genPoints; i++ {
				ts := t0.Add(time.Duration(i) * genStep).Unix()
				fmt.Fprintf(&b, "%s{instance=%q,engine_type=%q,model_name=\"qwen\",tp_rank=\"0\"} %s %d\n",
					sampleName(m), in.instance, in.role, strconv.FormatFloat(m.value(n, i), 'g', -1, 64), ts)
			}
		}
	}
	b.WriteString("# EOF\n")
	return []byte(b.String())
}

type sampleKey struct {
	node, name, labels string
	ms                 uint64
}

func TestImportRangeFromPrometheus(t *testing.T) {
	// Aligned to the hour, two days back: old enough to be only in blocks,
	// as in a real postmortem.
	t0 := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Hour)
	promURL := startPrometheus(t, genOpenMetrics(t0))
	store := testdb.New(t)
	ctx := context.Background()

	step := time.Minute // every other generated sample
	r := Range{
		From: t0, To: t0.Add(2 * time.Hour), Step: step,
		NodeMap: map[string]string{"10.0.1.1:30000": "prefill-0"}, // decode left unmapped
	}
	// 121 points per series in windows of 50: three calls, so the test also
	// proves chunk boundaries neither drop nor repeat a step.
	im := &Importer{Store: store, MaxPoints: 50}

	want := map[sampleKey]float64{}
	nodes := []string{"prefill-0", "10.0.1.2:30000"}
	for _, m := range genMetrics {
		for n, in := range genInstances {
			labels := fmt.Sprintf("engine_type=%s,instance=%s,model_name=qwen,tp_rank=0", in.role, in.instance)
			for i := 0; i < genPoints; i += int(step / genStep) {
				ms := uint64(t0.Add(time.Duration(i) * genStep).UnixMilli())
				want[sampleKey{nodes[n], sampleName(m), labels, ms}] = m.value(n, i)
			}
		}
	}
	if len(want) != 8*121 {
		t.Fatalf("expected %d samples, test arithmetic is off", len(want))
	}

	for run := 1; run <= 2; run++ {
		st, err := im.ImportRange(ctx, promURL, r)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if st.Calls != 3 || st.Series != 8 || st.Samples != len(want) || st.NoNode != 0 {
			t.Fatalf("run %d stats = %+v, want 3 calls, 8 series, %d samples", run, st, len(want))
		}
		got := readSamples(t, store)
		if len(got) != len(want) {
			t.Fatalf("run %d: %d distinct samples in ClickHouse, want %d", run, len(got), len(want))
		}
		for k, w := range want {
			g, ok := got[k]
			switch {
			case !ok:
				t.Fatalf("run %d: missing %+v", run, k)
			case math.IsNaN(w) != math.IsNaN(g) || (!math.IsNaN(w) && g != w):
				t.Fatalf("run %d: %+v = %v, want %v", run, k, g, w)
			}
		}
	}
	// Both runs wrote every row; FINAL and GROUP BY on the key fold them.
	var final, groups uint64
	if err := store.QueryRow(ctx, "SELECT count() FROM metric_samples FINAL").Scan(&final); err != nil {
		t.Fatal(err)
	}
	if err := store.QueryRow(ctx, `SELECT count() FROM (SELECT name, node, series_id, ts_ms FROM metric_samples
 GROUP BY name, node, series_id, ts_ms)`).Scan(&groups); err != nil {
		t.Fatal(err)
	}
	if final != uint64(len(want)) || groups != uint64(len(want)) {
		t.Errorf("after two imports: FINAL count %d, GROUP BY count %d, want %d", final, groups, len(want))
	}

	t.Run("bad query is Prometheus' error", func(t *testing.T) {
		_, err := im.ImportRange(ctx, promURL, Range{From: t0, To: t0.Add(time.Hour), Queries: []string{"sglang:token_usage{"}})
		var ae *APIError
		if err == nil || !errors.As(err, &ae) || ae.Type != "bad_data" || ae.HTTPStatus != 400 {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("function dropping the name is refused", func(t *testing.T) {
		_, err := im.ImportRange(ctx, promURL, Range{From: t0, To: t0.Add(time.Hour), Queries: []string{"sum(sglang:context_len)"}})
		if err == nil || !strings.Contains(err.Error(), "__name__") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("over the 11000-point limit is split", func(t *testing.T) {
		// 2 h at 0.5 s is 14401 points per series. First show that one call
		// is really refused, then that the importer's split is accepted.
		base, _ := url.Parse(promURL)
		c := &promClient{base: base, http: http.DefaultClient, timeout: 10 * time.Second, maxBytes: 1 << 20}
		_, err := c.queryRange(ctx, "sglang:context_len", window{t0, t0.Add(2 * time.Hour)}, 500*time.Millisecond,
			func(*promSeries) error { return nil })
		var ae *APIError
		if !errors.As(err, &ae) || !strings.Contains(ae.Msg, "11,000") {
			t.Fatalf("unsplit call: err = %v, want Prometheus' resolution error", err)
		}
		st, err := (&Importer{Store: store}).ImportRange(ctx, promURL, Range{From: t0, To: t0.Add(2 * time.Hour),
			Step: 500 * time.Millisecond, Queries: []string{`sglang:context_len{engine_type="prefill"}`}})
		if err != nil {
			t.Fatal(err)
		}
		if st.Calls != 2 || st.Samples != 14401 {
			t.Fatalf("stats = %+v, want 2 calls and 14401 samples", st)
		}
	})
}

// readSamples returns the folded samples keyed by node, name, labels, time,
// the labels read as every reader reads them (through metric_series).
func readSamples(t *testing.T, s *chstore.Store) map[sampleKey]float64 {
	t.Helper()
	got := map[sampleKey]float64{}
	err := s.EachMetricSample(context.Background(), "", func(r chstore.MetricSampleRow) error {
		pairs := make([]string, len(r.LabelKeys))
		for i := range r.LabelKeys {
			pairs[i] = r.LabelKeys[i] + "=" + r.LabelValues[i]
		}
		if !sort.StringsAreSorted(r.LabelKeys) {
			t.Errorf("labels not sorted: %v", r.LabelKeys)
		}
		got[sampleKey{r.Node, r.Name, strings.Join(pairs, ","), r.TSMs}] = r.Value
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}
