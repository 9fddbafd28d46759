package alert_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/analyze/alert"
	"github.com/kvtrail/kvtrail/ingest/push"
)

func finding(id, an, group string, sev analyze.Severity, ts time.Time) analyze.Finding {
	return analyze.Finding{ID: id, Analyzer: an, GroupKey: group, Severity: sev, TS: ts, DecodeNode: "decode-1", Tenant: "t-" + id, Title: "t " + id}
}

func TestGrouper(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	g := &alert.Grouper{Repeat: time.Hour}
	steps := []struct {
		name  string
		at    time.Duration
		fs    []analyze.Finding
		want  []string // group keys alerted, sorted
		count map[string]int
	}{
		{"two groups", 0, []analyze.Finding{finding("a", "x", "boot1", "MEDIUM", t0), finding("b", "x", "boot1", "MEDIUM", t0), finding("c", "y", "", "HIGH", t0)},
			[]string{"x/boot1", "y/c"}, map[string]int{"x/boot1": 2, "y/c": 1}},
		{"same condition later: suppressed", 10 * time.Minute, []analyze.Finding{finding("d", "x", "boot1", "MEDIUM", t0)}, nil, nil},
		{"escalation: sent", 20 * time.Minute, []analyze.Finding{finding("e", "x", "boot1", "HIGH", t0)}, []string{"x/boot1"}, map[string]int{"x/boot1": 1}},
		{"after the quiet period: sent again", 90 * time.Minute, []analyze.Finding{finding("f", "x", "boot1", "HIGH", t0)}, []string{"x/boot1"}, nil},
		{"nothing new", 91 * time.Minute, nil, nil, nil},
	}
	for _, st := range steps {
		got := g.Group(t0.Add(st.at), st.fs)
		var keys []string
		for _, a := range got {
			keys = append(keys, a.GroupKey)
			if n, ok := st.count[a.GroupKey]; ok && a.Count != n {
				t.Errorf("%s: %s count %d, want %d", st.name, a.GroupKey, a.Count, n)
			}
		}
		if strings.Join(keys, ",") != strings.Join(st.want, ",") {
			t.Errorf("%s: alerted %v, want %v", st.name, keys, st.want)
		}
	}
}

type recordingSink struct {
	mu      sync.Mutex
	entries []push.Entry
}

func (s *recordingSink) Accept(_ context.Context, es []push.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = append(s.entries, es...)
	return nil
}

// Alerts forwarded with loki-client-go arrive intact at a Loki push
// endpoint: kvtrail's own receiver, which speaks the same protocol.
func TestLokiForwardingAgainstOwnReceiver(t *testing.T) {
	sink := &recordingSink{}
	srv := httptest.NewServer(push.Handler(push.KindLoki, push.Limits{}, sink, nil))
	defer srv.Close()
	l, err := alert.NewLoki(srv.URL+"/loki/api/v1/push", "secops", 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 7, 2, 8, 0, 0, 0, time.UTC)
	alerts := []alert.Alert{
		{GroupKey: "rejected_served/room:1", Analyzer: "rejected_served", Severity: "HIGH", Node: "decode-2", Count: 3, LastTS: ts, Title: "served after rejection <script>"},
		{GroupKey: "pool_below_context/boot", Analyzer: "pool_below_context", Severity: "MEDIUM", LastTS: ts.Add(time.Second), Title: "pool below context"},
	}
	if err := l.Notify(context.Background(), alerts); err != nil {
		t.Fatal(err)
	}
	l.Stop()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.entries) != 2 {
		t.Fatalf("receiver got %d entries, want 2", len(sink.entries))
	}
	// Alerts with different labels are different Loki streams, and the
	// client sends streams in no fixed order: match them by group key.
	byKey := map[string]alert.Alert{}
	for _, a := range alerts {
		byKey[a.GroupKey] = a
	}
	for i, e := range sink.entries {
		var got alert.Alert
		if err := json.Unmarshal([]byte(e.Line), &got); err != nil {
			t.Fatalf("entry %d is not an alert: %v", i, err)
		}
		want, ok := byKey[got.GroupKey]
		if !ok {
			t.Fatalf("entry %d: unexpected alert %+v", i, got)
		}
		delete(byKey, got.GroupKey)
		if got.Title != want.Title || got.Count != want.Count || !e.Ts.Equal(want.LastTS) {
			t.Errorf("entry %d = %+v at %s, want %+v", i, got, e.Ts, want)
		}
		if e.Stream["source"] != "kvtrail" || e.Stream["analyzer"] != want.Analyzer || e.Stream["severity"] != want.Severity || e.Tenant != "secops" {
			t.Errorf("entry %d labels %v tenant %q", i, e.Stream, e.Tenant)
		}
		if e.Stream["node"] != want.Node {
			t.Errorf("entry %d node label %q, want %q", i, e.Stream["node"], want.Node)
		}
	}
	if d := alert.DroppedEntries(); d != 0 {
		t.Errorf("loki-client-go dropped %v entries", d)
	}
}

func TestWebhook(t *testing.T) {
	var calls atomic.Int32
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway) // transient: retried
			return
		}
		body = make([]byte, r.ContentLength)
		_, _ = r.Body.Read(body)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	w := &alert.Webhook{URL: srv.URL + "/hook?token=s3cret"}
	if err := w.Notify(context.Background(), []alert.Alert{{GroupKey: "g", Analyzer: "a", Severity: "HIGH"}}); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || !strings.Contains(string(body), `"group_key":"g"`) {
		t.Fatalf("calls=%d body=%s", calls.Load(), body)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	defer bad.Close()
	err := (&alert.Webhook{URL: bad.URL + "/hook?token=s3cret"}).Notify(context.Background(), []alert.Alert{{GroupKey: "g"}})
	if err == nil || !strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("4xx: %v", err)
	}
	down := &alert.Webhook{URL: "http://127.0.0.1:1/hook?token=s3cret", Retries: 2}
	if err := down.Notify(context.Background(), []alert.Alert{{GroupKey: "g"}}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("unreachable webhook: %v", err)
	}
}

type fakeNotifier struct {
	got [][]alert.Alert
	err error
}

func (f *fakeNotifier) Name() string { return "fake" }
func (f *fakeNotifier) Notify(_ context.Context, a []alert.Alert) error {
	f.got = append(f.got, a)
	return f.err
}

func TestWatcherCountsAndGroups(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	findings, failures := alert.NewMetrics(reg)
	rounds := [][]analyze.Finding{
		{finding("a", "rejected_served", "r1", "HIGH", t0), finding("b", "rejected_served", "r1", "HIGH", t0)},
		{finding("c", "rejected_served", "r1", "HIGH", t0)}, // same ongoing condition
		{},
	}
	round := 0
	n := &fakeNotifier{}
	w := &alert.Watcher{
		Analyze: func(context.Context, analyze.Window) (*analyze.Report, error) {
			fs := rounds[round]
			round++
			return &analyze.Report{Runs: []analyze.RunResult{{New: fs}}}, nil
		},
		Lookback: time.Hour, Grouper: &alert.Grouper{Repeat: time.Hour}, Notifiers: []alert.Notifier{n},
		Findings: findings, Failures: failures, Now: func() time.Time { return t0 },
	}
	for range rounds {
		if _, err := w.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(n.got) != 1 || len(n.got[0]) != 1 || n.got[0][0].Count != 2 {
		t.Fatalf("notifications %+v, want one alert for the group with 2 findings", n.got)
	}
	if v := testutil.ToFloat64(findings.WithLabelValues("rejected_served", "HIGH")); v != 3 {
		t.Fatalf("kvtrail_findings_total = %v, want 3", v)
	}
	// A failing notifier is counted, and the round reports it.
	w.Analyze = func(context.Context, analyze.Window) (*analyze.Report, error) {
		return &analyze.Report{Runs: []analyze.RunResult{{New: []analyze.Finding{finding("z", "other", "g", "HIGH", t0)}}}}, nil
	}
	n.err = errors.New("down")
	if _, err := w.Tick(context.Background()); err == nil {
		t.Fatal("notifier failure not reported")
	}
	if v := testutil.ToFloat64(failures.WithLabelValues("notify_fake")); v != 1 {
		t.Fatalf("failures = %v", v)
	}
}

// TestFindingsCounterExistsBeforeAnyFinding: /metrics must carry
// kvtrail_findings_total for every analyzer and severity from the start,
// so a rate() over it reads 0, not "no data".
func TestFindingsCounterExistsBeforeAnyFinding(t *testing.T) {
	reg := prometheus.NewRegistry()
	alert.NewMetrics(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		if mf.GetName() == "kvtrail_findings_total" {
			series = len(mf.GetMetric())
		}
	}
	if want := len(analyze.Names()) * len(analyze.Severities); series != want {
		t.Fatalf("kvtrail_findings_total has %d series before any finding, want %d", series, want)
	}
}
