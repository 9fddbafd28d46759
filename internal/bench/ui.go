package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/kvtrail/kvtrail/internal/apitoken"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/config"
	"github.com/kvtrail/kvtrail/web"
)

// UIOptions sizes the UI benchmark.
type UIOptions struct {
	// Samples is how many distinct objects (requests, findings, lines) of
	// each page type are opened.
	Samples int
	// Warm is how many times each URL is opened again after its first
	// (cold) visit.
	Warm int
	// DropCaches drops ClickHouse's mark and uncompressed caches before
	// each cold visit (SYSTEM DROP ... CACHE), so "cold" includes reading
	// the index marks again. The OS page cache is not touched.
	DropCaches bool
	Logger     *slog.Logger
	// ExportDir is the server's export directory (nothing is exported).
	ExportDir string
	// GapThreshold is the analyzers' gap threshold, which the overview's
	// gaps use (as serve wires it).
	GapThreshold time.Duration
}

// PageTiming is the measured server time of one page type.
type PageTiming struct {
	Page       string
	URLs       int
	Cold, Warm []time.Duration
}

// P is the q-quantile (0..1) of d (nearest rank).
func P(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[min(i, len(s)-1)]
}

// UIResult is one run of the UI benchmark.
type UIResult struct {
	Requests uint64
	Lines    uint64
	Pages    []PageTiming
	// KeyRead is the baseline floor: one id_index primary-key read
	// (p50 over the sampled request ids). LineScan is what one page cost
	// before it was keyed: a scan of raw_lines for one line id (p50).
	KeyRead, LineScan time.Duration
}

// UI serves kvtrail's UI on conn (which must hold ingested and analyzed
// data) through a real HTTP server and times each page type a responder
// opens: the request page, a finding's detail, an evidence line, and the
// overview, findings list and tenant search. Each sampled URL is opened
// once cold and then Warm times.
func UI(ctx context.Context, conn *chstore.Store, o UIOptions) (UIResult, error) {
	var res UIResult
	if o.Samples <= 0 {
		o.Samples = 20
	}
	if o.Warm <= 0 {
		o.Warm = 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// A token in the current format (id and secret), made fresh per run.
	token, hash, err := apitoken.New()
	if err != nil {
		return res, err
	}
	auth := config.Default().Auth
	auth.SessionKey = "bench-ui-session-key-0123456789abcdef"
	auth.Tokens = []config.Token{{Name: "bench", Role: "admin", TokenHash: config.Secret(hash)}}
	h, err := web.NewServer(web.Options{Logger: o.Logger, Store: chstore.NewUIStore(conn, o.GapThreshold), Auth: auth, ExportDir: o.ExportDir, Version: "bench"})
	if err != nil {
		return res, err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (time.Duration, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := srv.Client().Do(req)
		if err != nil {
			return 0, nil, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if err != nil {
			return 0, nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, nil, fmt.Errorf("GET %s: %d: %.200s", path, resp.StatusCode, body)
		}
		return d, body, nil
	}
	if res.Requests, res.Lines, err = conn.BenchUICounts(ctx); err != nil {
		return res, err
	}

	// Samples: requests named by findings (the ones a responder opens)
	// and random ones; findings of the latest runs as the API lists them;
	// evidence lines as finding pages link them.
	// Request URLs carry ?tenant= as the UI's links do.
	var reqIDs, rawIDs []string
	var fpage struct {
		Findings []struct {
			ID        string `json:"finding_id"`
			RequestID string `json:"gateway_request_id"`
			Tenant    string `json:"tenant"`
		} `json:"findings"`
	}
	// HIGH findings first (what a responder opens), then any others when a
	// small dataset has too few.
	var all []struct {
		ID        string `json:"finding_id"`
		RequestID string `json:"gateway_request_id"`
		Tenant    string `json:"tenant"`
	}
	seen := map[string]bool{}
	for _, q := range []string{"&severity=HIGH", ""} {
		_, body, err := get("/api/v1/findings?limit=" + strconv.Itoa(o.Samples) + q)
		if err != nil {
			return res, err
		}
		if err := json.Unmarshal(body, &fpage); err != nil {
			return res, fmt.Errorf("findings: %w", err)
		}
		for _, f := range fpage.Findings {
			if !seen[f.ID] && len(all) < o.Samples {
				seen[f.ID] = true
				all = append(all, f)
			}
		}
	}
	var findingIDs []string
	for _, f := range all {
		findingIDs = append(findingIDs, f.ID)
		if f.RequestID != "" && len(reqIDs) < o.Samples/2 {
			reqIDs = append(reqIDs, url.PathEscape(f.RequestID)+"?tenant="+url.QueryEscape(f.Tenant))
			rawIDs = append(rawIDs, f.RequestID)
		}
	}
	sample, err := conn.BenchSampleRequests(ctx, o.Samples-len(reqIDs))
	if err != nil {
		return res, err
	}
	for _, r := range sample {
		reqIDs = append(reqIDs, url.PathEscape(r.ID)+"?tenant="+url.QueryEscape(r.Tenant))
		rawIDs = append(rawIDs, r.ID)
	}
	var lineURLs []string
	for _, id := range findingIDs {
		if len(lineURLs) >= o.Samples {
			break
		}
		_, body, err := get("/api/v1/findings/" + url.PathEscape(id))
		if err != nil {
			return res, err
		}
		var d struct {
			Lines []struct {
				ID string    `json:"line_id"`
				TS time.Time `json:"ts"`
			} `json:"evidence_lines"`
		}
		if err := json.Unmarshal(body, &d); err != nil {
			return res, fmt.Errorf("finding detail: %w", err)
		}
		for _, l := range d.Lines {
			lineURLs = append(lineURLs, fmt.Sprintf("/evidence/%s?at=%d", l.ID, l.TS.Unix()))
			break
		}
	}
	tenant := conn.BenchAnyTenant(ctx)

	types := []struct {
		page string
		urls []string
	}{
		{"request page", prefixedRaw("/requests/", reqIDs)},
		{"finding detail", prefixed("/findings/", findingIDs)},
		{"evidence line", lineURLs},
		{"overview", []string{"/"}},
		{"findings list", []string{"/findings"}},
		{"tenant search", []string{"/search?tenant=" + url.QueryEscape(tenant)}},
	}
	for _, t := range types {
		pt := PageTiming{Page: t.page, URLs: len(t.urls)}
		for _, u := range t.urls {
			if o.DropCaches {
				if err := conn.DropQueryCaches(ctx); err != nil {
					return res, err
				}
			}
			d, _, err := get(u)
			if err != nil {
				return res, err
			}
			pt.Cold = append(pt.Cold, d)
			for i := 0; i < o.Warm; i++ {
				d, _, err := get(u)
				if err != nil {
					return res, err
				}
				pt.Warm = append(pt.Warm, d)
			}
		}
		res.Pages = append(res.Pages, pt)
	}

	// The baseline, in the same run: a primary-key read and a line scan.
	var keys, scans []time.Duration
	for i, id := range rawIDs {
		start := time.Now()
		if err := conn.BenchKeyRead(ctx, id); err != nil {
			return res, fmt.Errorf("key read: %w", err)
		}
		keys = append(keys, time.Since(start))
		if i < 5 {
			start = time.Now()
			if err := conn.BenchLineScan(ctx, uint64(i+1)); err != nil {
				return res, fmt.Errorf("line scan: %w", err)
			}
			scans = append(scans, time.Since(start))
		}
	}
	res.KeyRead, res.LineScan = P(keys, 0.5), P(scans, 0.5)
	return res, nil
}

func prefixedRaw(p string, paths []string) []string {
	out := make([]string, len(paths))
	for i, x := range paths {
		out[i] = p + x
	}
	return out
}

func prefixed(p string, ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = p + url.PathEscape(id)
	}
	return out
}
