package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// fakeEndpoint is an OpenAI-compatible endpoint whose tokenizer is "one
// token per whitespace-separated word". Prompts of at least limit tokens
// get a 400 unless serveOverLimit (the #30233 behaviour: 200, prompt
// reported as 1 token); with leak, an answer carries the last prompt's
// marker of another API key (stale pages).
type fakeEndpoint struct {
	limit          int
	serveOverLimit bool
	leak           bool
	usage          bool

	mu     sync.Mutex
	last   map[string]string // key -> last marker seen
	keys   map[string]int
	stream int
}

var testMarker = regexp.MustCompile(`KVT-[0-9a-f]{16}`)

func (f *fakeEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	p := req.Messages[0].Content
	n := len(strings.Fields(p))
	own := testMarker.FindString(p)
	f.mu.Lock()
	f.keys[key]++
	var stale string
	for k, m := range f.last {
		if k != key {
			stale = m
		}
	}
	f.last[key] = own
	if req.Stream {
		f.stream++
	}
	f.mu.Unlock()
	prompt := n
	if n >= f.limit {
		if !f.serveOverLimit {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"object":"error","message":"Input length (%d tokens) exceeds the maximum allowed length (%d tokens)."}`, n, f.limit)
			return
		}
		prompt = 1
	}
	text := own
	if f.leak && stale != "" && n < 200 { // short prompts read stale pages
		text = "sure: " + stale
	}
	u := ""
	if f.usage {
		u = fmt.Sprintf(`,"usage":{"prompt_tokens":%d,"completion_tokens":3}`, prompt)
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]%s}`, text, u)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	half := len(text) / 2
	for _, part := range []string{text[:half], text[half:]} {
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", part)
	}
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	if f.usage {
		fmt.Fprintf(w, "data: {\"choices\":[]%s}\n\n", u)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func newFake(limit int) *fakeEndpoint {
	return &fakeEndpoint{limit: limit, usage: true, last: map[string]string{}, keys: map[string]int{}}
}

func newTestProber(t *testing.T, url string) *Prober {
	t.Helper()
	p, err := New(Config{Endpoint: url, Model: "m", MaxTokens: 8, MaxPromptTokens: 10000, Margin: 16,
		Identities: []Identity{{"canary-a", "key-a"}, {"canary-b", "key-b"}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func verdicts(rs []Result) map[string]string {
	out := map[string]string{}
	for _, r := range rs {
		out[r.Kind+fmt.Sprint(r.Stream)] += r.Verdict + " "
	}
	return out
}

func TestProbeRounds(t *testing.T) {
	const limit = 3000
	th := []Threshold{{Node: "prefill-0", Tokens: limit}}
	for _, c := range []struct {
		name  string
		fake  func(*fakeEndpoint)
		want  map[string]int // verdict -> count over two rounds
		check func(t *testing.T, p *Prober, rs []Result)
	}{
		{"healthy endpoint: nothing found", func(*fakeEndpoint) {},
			map[string]int{VerdictOK: 10}, nil},
		{"over-limit prompt served with 200", func(f *fakeEndpoint) { f.serveOverLimit = true },
			map[string]int{VerdictOK: 8, VerdictOverLimitServed: 2}, nil},
		{"answers carry another identity's marker", func(f *fakeEndpoint) { f.leak = true }, nil,
			func(t *testing.T, p *Prober, rs []Result) {
				leaks := 0
				for _, r := range rs {
					if r.Verdict != VerdictLeak {
						continue
					}
					leaks++
					if len(r.ForeignProbes) == 0 || r.ForeignProbes[0] == "" {
						t.Errorf("leak %s: foreign marker not traced to a probe", r.ID)
						continue
					}
					_, ident, ok := p.ProbeOf(r.ForeignMarkers[0])
					if !ok || ident == r.Identity {
						t.Errorf("leak %s from %s traced to identity %q", r.ID, r.Identity, ident)
					}
				}
				if leaks < 2 {
					t.Errorf("leaks = %d, want at least 2 (both streaming and not): %v", leaks, verdicts(rs))
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(limit)
			c.fake(f)
			srv := httptest.NewServer(f)
			defer srv.Close()
			p := newTestProber(t, srv.URL)
			var rs []Result
			for range 2 {
				r, err := p.Round(context.Background(), th)
				if err != nil {
					t.Fatal(err)
				}
				rs = append(rs, r...)
			}
			// calibration (2) + 2 rounds x (2 short + below + above)
			if len(rs) != 10 {
				t.Fatalf("results = %d, want 10", len(rs))
			}
			for _, r := range rs {
				switch r.Kind {
				case KindBelow:
					if r.PromptTokens == 0 || r.PromptTokens >= limit || r.PromptTokens < limit-2*16 {
						t.Errorf("below probe counted %d tokens, want just under %d", r.PromptTokens, limit)
					}
				case KindAbove:
					if r.Status == 400 && r.Verdict != VerdictOK {
						t.Errorf("above probe refused with 400 judged %s", r.Verdict)
					}
				}
			}
			if f.stream == 0 || f.keys["key-a"] == 0 || f.keys["key-b"] == 0 {
				t.Errorf("streamed %d, keys %v: want both modes and both identities", f.stream, f.keys)
			}
			if c.want != nil {
				got := map[string]int{}
				for _, r := range rs {
					got[r.Verdict]++
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("verdicts = %v, want %v (%v)", got, c.want, verdicts(rs))
				}
			}
			if c.check != nil {
				c.check(t, p, rs)
			}
		})
	}
}

func TestProbeBudgetAndErrors(t *testing.T) {
	f := newFake(3000)
	f.usage = false // no usage: long probes cannot be sized
	srv := httptest.NewServer(f)
	defer srv.Close()
	p := newTestProber(t, srv.URL)
	rs, err := p.Round(context.Background(), []Threshold{{Node: "n", Tokens: 3000}, {Node: "big", Tokens: 50000}})
	if err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for _, r := range rs {
		if r.Verdict == VerdictSkipped {
			skipped++
			if !strings.Contains(r.Err, "calibrat") {
				t.Errorf("skip reason %q", r.Err)
			}
		}
	}
	if skipped != 4 {
		t.Errorf("skipped = %d, want 4 (no usage.prompt_tokens to calibrate)", skipped)
	}

	// Unreachable endpoint: every probe is an error result, no panic.
	dead := newTestProber(t, "http://127.0.0.1:1")
	rs, _ = dead.Round(context.Background(), nil)
	for _, r := range rs {
		if r.Verdict != VerdictError || r.Err == "" {
			t.Errorf("unreachable endpoint: %s %q", r.Verdict, r.Err)
		}
	}
	if _, err := New(Config{Endpoint: srv.URL, Identities: []Identity{{"only", "k"}}}); err == nil {
		t.Error("one identity accepted")
	}
	// Over the token budget: not sent.
	p2, _ := New(Config{Endpoint: srv.URL, MaxPromptTokens: 1000, Identities: []Identity{{"a", "1"}, {"b", "2"}}})
	f.usage = true
	rs, _ = p2.Round(context.Background(), []Threshold{{Node: "n", Tokens: 3000}})
	for _, r := range rs {
		if (r.Kind == KindAbove || r.Kind == KindBelow) && (r.Verdict != VerdictSkipped || r.Status != 0) {
			t.Errorf("%s over budget: %s status %d", r.Kind, r.Verdict, r.Status)
		}
	}
}

// TestProbeFindingsStoredAnalyzedAndCounted: a leaking endpoint's results
// go to ClickHouse, the canary_probe analyzer raises a HIGH finding naming
// both requests, and /metrics counts them.
func TestProbeFindingsStoredAnalyzedAndCounted(t *testing.T) {
	s := testdb.New(t)
	f := newFake(3000)
	f.leak, f.serveOverLimit = true, true
	srv := httptest.NewServer(f)
	defer srv.Close()
	p := newTestProber(t, srv.URL)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	var all []Result
	for range 2 {
		rs, err := p.Round(context.Background(), []Threshold{{Node: "prefill-0", Tokens: 3000}})
		if err != nil {
			t.Fatal(err)
		}
		m.Observe(rs)
		if err := Save(context.Background(), s, rs); err != nil {
			t.Fatal(err)
		}
		all = append(all, rs...)
	}
	if got := testutil.ToFloat64(m.Probes.WithLabelValues("canary-b", KindShort, VerdictLeak)); got < 1 {
		t.Errorf("kvtrail_probes_total{canary-b,short,leak} = %v", got)
	}
	r := &analyze.Runner{DB: s, Cfg: analyze.DefaultConfig(), Trigger: "test", SkipReconstruct: true,
		Analyzers: []analyze.Analyzer{&analyze.CanaryProbe{}}}
	now := time.Now().UTC()
	rep, err := r.Run(context.Background(), analyze.Window{From: now.Add(-time.Hour), To: now.Add(time.Minute)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Result{}
	for _, x := range all {
		byID[x.ID] = x
	}
	var leaks, over int
	for _, fd := range rep.Runs[0].Findings {
		if fd.Severity != analyze.High {
			t.Errorf("%s: severity %s", fd.Title, fd.Severity)
		}
		switch {
		case strings.Contains(fd.Title, "marker"):
			leaks++
			if len(fd.ForeignRequestKeys) == 0 {
				t.Errorf("leak finding without the other request: %s", fd.Title)
				continue
			}
			other := byID[strings.TrimPrefix(fd.ForeignRequestKeys[0], "probe:")]
			me := byID[fd.Details["probe_id"]]
			if other.ID == "" || me.ID == "" || !strings.Contains(me.Text, other.Marker) {
				t.Errorf("leak finding %s does not name the probe whose marker leaked", fd.ID)
			}
		case strings.Contains(fd.Title, "Over-limit"):
			over++
		}
	}
	if leaks == 0 || over == 0 {
		t.Errorf("findings: %d leaks, %d over-limit; want both", leaks, over)
	}
}
