package web

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// seriesOf reads each chart's id and series count from a page.
func seriesOf(page string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`<svg class="chart" id="([^"]+)" data-series="(\d+)"`).FindAllStringSubmatch(page, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestChartsRender opens the request and case pages on seeded data and
// checks each picture: drawn with its series, axes labelled, UTC stated and
// its data table present.
func TestChartsRender(t *testing.T) {
	u := seededUI(t)
	// Batch lines of the victim's decode rank around its time.
	vts := seedStart.Add(30 * time.Minute)
	var batches [][]any
	for i := -3; i <= 3; i++ {
		ts := vts.Add(time.Duration(i) * time.Minute)
		batches = append(batches, []any{ts, uint64(ts.UnixNano()), "decode-0", "decode", int16(2), 0.5 + float64(i)/10, uint64(1000), int32(4), uint64(7000 + i + 3)})
	}
	mustExec(t, u.store, `INSERT INTO batch_stats (ts, ts_ns, node, role, dp_rank, token_usage, num_token, running_req, line_id)`, batches...)
	code, body := u.api(t, "admin", "POST", "/api/v1/cases", map[string]any{"name": "chart case",
		"window_from": seedStart.Format(time.RFC3339), "window_to": seedStart.Add(2 * time.Hour).Format(time.RFC3339)})
	if code != http.StatusCreated {
		t.Fatalf("create case = %d: %s", code, body)
	}
	var cs Case
	_ = json.Unmarshal(body, &cs)
	c, _, _ := u.login(t, "viewer-user", testPassword)
	for _, tc := range []struct {
		path string
		want map[string]string
	}{
		// gateway, prefill and decode lanes hold events; transfer none.
		{"/requests/" + seedRequest, map[string]string{"swimlanes": "3", "pool-chart": "1"}},
		// one analyzer/severity; the prompt chart: threshold, within,
		// over, context length.
		{"/cases/" + cs.ID, map[string]string{"affected-chart": "1", "prompt-prefill-0": "4"}},
	} {
		resp, err := c.Get(u.srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(b)
		got := seriesOf(page)
		for id, n := range tc.want {
			if got[id] != n {
				t.Errorf("%s: chart %s has %q series, want %s (charts: %v)", tc.path, id, got[id], n, got)
			}
		}
		for _, must := range []string{"(UTC)", `class="axis-label"`, "<summary>Data table</summary>", "<circle", "times in UTC"} {
			if !strings.Contains(page, must) {
				t.Errorf("%s lacks %q", tc.path, must)
			}
		}
	}
}

func TestPromptChartMarksHoursOverTheLimit(t *testing.T) {
	h := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	pts := []PromptPoint{{Node: "p", Hour: h, Max: 500, Total: 3}, {Node: "p", Hour: h.Add(time.Hour), Max: 900, Over: 2, Total: 4},
		{Node: "p", Hour: h.Add(2 * time.Hour), Max: 400, Total: 1}}
	boots := []NodeLimits{{Node: "p", BootTS: h.Add(-time.Hour), MaxReqInputLen: 600, MaxTotalNumTokens: 606, ContextLen: 1000}}
	c := promptChart("p", pts, boots)
	var over, within int
	for _, s := range c.Series {
		switch s.Class {
		case "pt-over":
			over = len(s.Points)
		case "pt-ok":
			within = len(s.Points)
		case "line-limit":
			if s.Path == "" {
				t.Error("no threshold line")
			}
		}
	}
	if over != 1 || within != 2 || len(c.Table.Rows) != 3 {
		t.Fatalf("over %d within %d rows %d", over, within, len(c.Table.Rows))
	}
	// The threshold (600) is drawn below the 900-token point: higher y.
	var limY, overY int
	for _, s := range c.Series {
		if s.Class == "pt-over" {
			overY = s.Points[0].Y
		}
		if s.Class == "line-limit" {
			var x int
			_, _ = fmt.Sscanf(s.Path, "M%d %d", &x, &limY)
		}
	}
	if !(overY < limY) {
		t.Fatalf("point over the limit at y=%d is not above the threshold at y=%d", overY, limY)
	}
}

// A rejected case form comes back with the message and the input kept.
func TestCaseFormKeepsInputOnError(t *testing.T) {
	u := seededUI(t)
	c, csrf, _ := u.login(t, "responder-user", testPassword)
	resp, err := c.PostForm(u.srv.URL+"/cases", map[string][]string{"_csrf": {csrf}, "name": {"late <b>window</b>"},
		"window_from": {"2026-07-02T00:00"}, "window_to": {"2026-07-01T00:00"}, "tenants": {"acme"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `id="case-error"`) || !strings.Contains(page, "from must be before to") {
		t.Fatalf("status %d, page lacks the message: %.300s", resp.StatusCode, page)
	}
	for _, kept := range []string{`value="late &lt;b&gt;window&lt;/b&gt;"`, `value="2026-07-02T00:00"`, `value="acme"`, `<nav>`} {
		if !strings.Contains(page, kept) {
			t.Errorf("re-rendered form lacks %s", kept)
		}
	}
}
