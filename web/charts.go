package web

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// Chart is a server-rendered SVG chart (templates/partials.html, block
// "chart"): no script, so the CSP stays strict. Every chart names its
// axes, states UTC, and carries its data as a table one click away
// (<details>), for screen readers and for copying numbers.
type Chart struct {
	ID, Title      string
	XLabel, YLabel string
	W, H           int
	// Plot area inside the margins.
	X0, Y0, X1, Y1 int
	XTicks, YTicks []Tick
	Series         []Series
	Markers        []Marker
	Table          ChartTable
}

// Tick is an axis label at a pixel position.
type Tick struct {
	Pos  int
	Text string
}

// Series is one named set of marks; Kind is "line" (Path), "points" or
// "bars" (Rects). Class picks the colour from app.css.
type Series struct {
	Name, Class, Kind string
	Path              string
	Points            []Pt
	Rects             []Rect
}

// Pt is a point mark with its tooltip.
type Pt struct {
	X, Y  int
	Title string
}

// Rect is a bar or a lane segment with its tooltip.
type Rect struct {
	X, Y, W, H int
	Title      string
}

// Marker is a labelled vertical line (a boot that changed a limit).
type Marker struct {
	X    int
	Text string
}

// ChartTable is the chart's data.
type ChartTable struct {
	Head []string
	Rows [][]string
}

// SeriesCount is what the browser test checks a chart against.
func (c *Chart) SeriesCount() int { return len(c.Series) }

// newChart sets the frame: margins leave room for the axis labels.
func newChart(id, title, xLabel, yLabel string) *Chart {
	c := &Chart{ID: id, Title: title, XLabel: xLabel + " (UTC)", YLabel: yLabel, W: 900, H: 260}
	c.X0, c.Y0, c.X1, c.Y1 = 70, 20, c.W-20, c.H-50
	return c
}

// timeScale maps times in [from, to] onto the plot's x range.
type timeScale struct {
	from, to time.Time
	x0, x1   int
}

func (s timeScale) px(t time.Time) int {
	span := s.to.Sub(s.from)
	if span <= 0 {
		return s.x0
	}
	return s.x0 + int(float64(t.Sub(s.from))/float64(span)*float64(s.x1-s.x0))
}

// linScale maps [0, max] onto the plot's y range (up).
type linScale struct {
	max    float64
	y0, y1 int // y0 bottom pixel, y1 top pixel
}

func (s linScale) px(v float64) int {
	if s.max <= 0 {
		return s.y0
	}
	return s.y0 - int(v/s.max*float64(s.y0-s.y1))
}

// timeTicks labels about n points of [from, to], with a format fitting
// the span.
func timeTicks(s timeScale, n int) []Tick {
	span := s.to.Sub(s.from)
	layout := "01-02 15:04"
	switch {
	case span < 2*time.Minute:
		layout = "15:04:05.000"
	case span < 6*time.Hour:
		layout = "15:04:05"
	}
	var out []Tick
	for i := 0; i <= n; i++ {
		t := s.from.Add(time.Duration(float64(span) * float64(i) / float64(n)))
		out = append(out, Tick{Pos: s.px(t), Text: t.UTC().Format(layout)})
	}
	return out
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func valueTicks(s linScale) []Tick {
	var out []Tick
	for i := 0; i <= 4; i++ {
		v := s.max * float64(i) / 4
		out = append(out, Tick{Pos: s.px(v), Text: human(v)})
	}
	return out
}

// human writes 1200000 as 1.2M.
func human(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// swimlaneChart draws a request's events on its lanes against time (the
// corrected times), with the clock correction ingest applied to each
// node's lines named in each mark's tooltip and in the data table.
func swimlaneChart(tl *Timeline, offsets []NodeOffset) *Chart {
	if len(tl.Events) == 0 {
		return nil
	}
	c := newChart("swimlanes", "Request timeline by lane", "time", "lane")
	c.H = 60 + 40*len(lanes)
	c.Y1 = c.H - 50
	first, last := time.Unix(0, int64(tl.Events[0].TSNS)), time.Unix(0, int64(tl.Events[0].TSNS))
	for _, e := range tl.Events {
		t := time.Unix(0, int64(e.TSNS))
		first, last = minTime(first, t), maxTime(last, t)
	}
	pad := max(last.Sub(first)/20, 50*time.Millisecond)
	ts := timeScale{from: first.Add(-pad), to: last.Add(pad), x0: c.X0, x1: c.X1}
	c.XTicks = timeTicks(ts, 5)
	laneY := map[string]int{}
	for i, l := range lanes {
		y := c.Y0 + 20 + i*40
		laneY[l] = y
		c.YTicks = append(c.YTicks, Tick{Pos: y, Text: l})
	}
	off := map[string]string{}
	for _, o := range offsets {
		off[o.Node] = o.Text()
	}
	offText := func(node string) string {
		if t, ok := off[node]; ok {
			return t
		}
		return "unknown"
	}
	c.Table.Head = []string{"time (UTC, corrected)", "lane", "node", "clock offset applied", "event", "detail", "line"}
	for _, l := range lanes {
		s := Series{Name: l, Class: "lane-" + l, Kind: "points"}
		for _, e := range tl.Events {
			if e.Lane != l {
				continue
			}
			t := time.Unix(0, int64(e.TSNS)).UTC()
			s.Points = append(s.Points, Pt{X: ts.px(t), Y: laneY[l],
				Title: fmt.Sprintf("%s %s on %s (clock offset %s): %s", t.Format("15:04:05.000"), e.Event, e.Node, offText(e.Node), e.Detail)})
		}
		if len(s.Points) > 0 {
			c.Series = append(c.Series, s)
		}
	}
	for _, e := range tl.Events {
		c.Table.Rows = append(c.Table.Rows, []string{time.Unix(0, int64(e.TSNS)).UTC().Format("2006-01-02 15:04:05.000"),
			e.Lane, e.Node, offText(e.Node), e.Event, e.Detail, e.LineID.String()})
	}
	return c
}

// LimitChange is a boot whose limits differ from the node's previous boot.
type LimitChange struct {
	Node   string    `json:"node"`
	At     time.Time `json:"at"`
	Before uint64    `json:"max_total_num_tokens_before"`
	After  uint64    `json:"max_total_num_tokens"`
}

// affectedChart stacks each hour's affected requests by analyzer and
// severity, with the boots that changed a node's limit marked.
func affectedChart(from, to time.Time, buckets []CaseBucket, changes []LimitChange) *Chart {
	if len(buckets) == 0 {
		return nil
	}
	c := newChart("affected-chart", "Affected requests over time, by analyzer and severity", "hour", "requests per hour")
	first, last := buckets[0].Hour, buckets[0].Hour
	for _, b := range buckets {
		first, last = minTime(first, b.Hour), maxTime(last, b.Hour)
	}
	if !from.IsZero() && from.Before(first) && first.Sub(from) < 90*24*time.Hour {
		first = from.Truncate(time.Hour)
	}
	if !to.IsZero() && to.After(last) && to.Sub(last) < 90*24*time.Hour {
		last = to.Truncate(time.Hour)
	}
	last = last.Add(time.Hour)
	ts := timeScale{from: first, to: last, x0: c.X0, x1: c.X1}
	stack := map[int64]uint64{}
	for _, b := range buckets {
		stack[b.Hour.Unix()] += b.N
	}
	var top uint64
	for _, n := range stack {
		top = max(top, n)
	}
	ys := linScale{max: niceMax(float64(top)), y0: c.Y1, y1: c.Y0}
	c.XTicks, c.YTicks = timeTicks(ts, 6), valueTicks(ys)
	bw := max(ts.px(first.Add(time.Hour))-ts.px(first)-1, 1)
	type key struct{ a, s string }
	var keys []key
	by := map[key][]CaseBucket{}
	for _, b := range buckets {
		k := key{b.Analyzer, b.Severity}
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], b)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].s != keys[j].s {
			return sevRank(keys[i].s) < sevRank(keys[j].s)
		}
		return keys[i].a < keys[j].a
	})
	base := map[int64]uint64{}
	for i, k := range keys {
		s := Series{Name: k.a + " " + k.s, Class: fmt.Sprintf("%s series-%d", sevClass(k.s), i%6), Kind: "bars"}
		for _, b := range by[k] {
			lo := base[b.Hour.Unix()]
			y0, y1 := ys.px(float64(lo)), ys.px(float64(lo+b.N))
			s.Rects = append(s.Rects, Rect{X: ts.px(b.Hour), Y: y1, W: bw, H: max(y0-y1, 1),
				Title: fmt.Sprintf("%s UTC: %d %s %s", b.Hour.UTC().Format("2006-01-02 15:00"), b.N, k.a, k.s)})
			base[b.Hour.Unix()] = lo + b.N
		}
		c.Series = append(c.Series, s)
	}
	for _, ch := range changes {
		if ch.At.Before(first) || ch.At.After(last) {
			continue
		}
		c.Markers = append(c.Markers, Marker{X: ts.px(ch.At), Text: fmt.Sprintf("%s pool %s → %s", ch.Node, human(float64(ch.Before)), human(float64(ch.After)))})
	}
	c.Table.Head = []string{"hour (UTC)", "analyzer", "severity", "requests"}
	for _, b := range buckets {
		c.Table.Rows = append(c.Table.Rows, []string{b.Hour.UTC().Format("2006-01-02 15:00"), b.Analyzer, b.Severity, strconv.FormatUint(b.N, 10)})
	}
	return c
}

// promptChart draws, for one node, each hour's longest prompt against the
// rejection threshold in force (a step line from the boots), the hours with
// prompts over it marked.
func promptChart(node string, pts []PromptPoint, boots []NodeLimits) *Chart {
	if len(pts) == 0 {
		return nil
	}
	c := newChart("prompt-"+node, "Prompt lengths vs the rejection threshold on "+node, "hour", "tokens")
	first, last := pts[0].Hour, pts[len(pts)-1].Hour.Add(time.Hour)
	ts := timeScale{from: first, to: last, x0: c.X0, x1: c.X1}
	var top float64
	for _, p := range pts {
		top = math.Max(top, float64(p.Max))
	}
	var ctx uint64
	for _, b := range boots {
		top = math.Max(top, float64(b.MaxTotalNumTokens))
		ctx = max(ctx, b.ContextLen)
	}
	ys := linScale{max: niceMax(top * 1.05), y0: c.Y1, y1: c.Y0}
	c.XTicks, c.YTicks = timeTicks(ts, 6), valueTicks(ys)
	under := Series{Name: "longest prompt per hour (within the limit)", Class: "pt-ok", Kind: "points"}
	over := Series{Name: "hours with prompts over the limit", Class: "pt-over", Kind: "points"}
	for _, p := range pts {
		pt := Pt{X: ts.px(p.Hour.Add(30 * time.Minute)), Y: ys.px(float64(p.Max)),
			Title: fmt.Sprintf("%s UTC: longest prompt %d tokens, %d of %d over the limit %d", p.Hour.UTC().Format("2006-01-02 15:00"), p.Max, p.Over, p.Total, p.Limit)}
		if p.Over > 0 {
			over.Points = append(over.Points, pt)
		} else {
			under.Points = append(under.Points, pt)
		}
	}
	// The threshold of the boot in force, as a step line over the boots.
	limit := Series{Name: "rejection threshold (the smaller of the KV pool and max_req_input_len)", Class: "line-limit", Kind: "line"}
	var path []byte
	for i, b := range boots {
		start := b.BootTS
		if start.Before(first) {
			start = first
		}
		end := last
		if i+1 < len(boots) && boots[i+1].BootTS.Before(last) {
			end = boots[i+1].BootTS
		}
		if end.Before(first) {
			continue
		}
		y := ys.px(float64(threshold(b)))
		cmd := "L"
		if len(path) == 0 {
			cmd = "M"
		}
		path = fmt.Appendf(path, "%s%d %d L%d %d ", cmd, ts.px(start), y, ts.px(end), y)
	}
	limit.Path = string(path)
	c.Series = append(c.Series, limit, under, over)
	if ctx > 0 {
		c.Markers = nil
		c.Series = append(c.Series, Series{Name: "context length", Class: "line-context", Kind: "line",
			Path: fmt.Sprintf("M%d %d L%d %d", c.X0, ys.px(float64(ctx)), c.X1, ys.px(float64(ctx)))})
	}
	c.Table.Head = []string{"hour (UTC)", "longest prompt", "over the limit", "requests", "limit"}
	for _, p := range pts {
		c.Table.Rows = append(c.Table.Rows, []string{p.Hour.UTC().Format("2006-01-02 15:00"), strconv.FormatUint(p.Max, 10),
			strconv.FormatUint(p.Over, 10), strconv.FormatUint(p.Total, 10), strconv.FormatUint(p.Limit, 10)})
	}
	return c
}

// threshold is the longest prompt the boot accepts: the smaller of
// max_req_input_len and the KV pool (a prompt over the pool cannot be held
// and is rejected even when the context length allows it: the 2026
// incident).
func threshold(b NodeLimits) uint64 {
	t := b.MaxTotalNumTokens
	if b.MaxReqInputLen > 0 && (t == 0 || b.MaxReqInputLen < t) {
		t = b.MaxReqInputLen
	}
	return t
}

func sevRank(s string) int {
	switch s {
	case "HIGH", "CRITICAL":
		return 0
	case "MEDIUM":
		return 1
	case "LOW":
		return 2
	}
	return 3
}

func sevClass(s string) string {
	return [...]string{"sev-high", "sev-medium", "sev-low", "sev-other"}[sevRank(s)]
}

// chartStore is what the case page's charts need.
type chartStore interface {
	CaseBuckets(ctx context.Context, from, to time.Time) ([]CaseBucket, error)
	PromptPoints(ctx context.Context, from, to time.Time) ([]PromptPoint, error)
	Fleet(ctx context.Context) ([]NodeLimits, error)
}

// limitChanges are the boots whose KV pool differs from the node's
// previous boot (boots sorted by node, time).
func limitChanges(boots []NodeLimits) []LimitChange {
	var out []LimitChange
	for i := 1; i < len(boots); i++ {
		a, b := boots[i-1], boots[i]
		if a.Node == b.Node && a.MaxTotalNumTokens != b.MaxTotalNumTokens {
			out = append(out, LimitChange{Node: b.Node, At: b.BootTS, Before: a.MaxTotalNumTokens, After: b.MaxTotalNumTokens})
		}
	}
	return out
}

// caseCharts builds the case page's pictures over the case window.
func caseCharts(ctx context.Context, st chartStore, cs Case) ([]*Chart, error) {
	from, to := cs.From, cs.To
	buckets, err := st.CaseBuckets(ctx, from, to)
	if err != nil {
		return nil, err
	}
	boots, err := st.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Chart
	if c := affectedChart(from, to, buckets, limitChanges(boots)); c != nil {
		out = append(out, c)
	}
	pts, err := st.PromptPoints(ctx, from, to)
	if err != nil {
		return nil, err
	}
	byNode := map[string][]PromptPoint{}
	var nodes []string
	for _, p := range pts {
		if _, ok := byNode[p.Node]; !ok {
			nodes = append(nodes, p.Node)
		}
		byNode[p.Node] = append(byNode[p.Node], p)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		var nb []NodeLimits
		for _, b := range boots {
			if b.Node == n {
				nb = append(nb, b)
			}
		}
		if c := promptChart(n, byNode[n], nb); c != nil {
			out = append(out, c)
		}
	}
	return out, nil
}

// poolChart draws the decode rank's KV pool usage (percent, from its batch
// lines) around the request, the request's time marked: a leak shows as
// pages held after requests finished.
func poolChart(tl *Timeline) *Chart {
	if len(tl.Pool) == 0 {
		return nil
	}
	c := newChart("pool-chart", fmt.Sprintf("KV pool usage on %s dp%d, ±%s around the request", tl.DecodeNode, tl.DecodeRank, poolWindow), "time", "pool used (%)")
	at := tl.Request.TS
	ts := timeScale{from: at.Add(-poolWindow), to: at.Add(poolWindow), x0: c.X0, x1: c.X1}
	ys := linScale{max: 100, y0: c.Y1, y1: c.Y0}
	c.XTicks, c.YTicks = timeTicks(ts, 6), valueTicks(ys)
	s := Series{Name: "token usage (batch lines)", Class: "line-usage", Kind: "line"}
	var path []byte
	c.Table.Head = []string{"time (UTC)", "pool used %", "tokens", "running", "line"}
	for i, p := range tl.Pool {
		t := time.Unix(0, int64(p.TSNS)).UTC()
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		path = fmt.Appendf(path, "%s%d %d ", cmd, ts.px(t), ys.px(p.Usage*100))
		c.Table.Rows = append(c.Table.Rows, []string{t.Format("2006-01-02 15:04:05.000"), strconv.FormatFloat(p.Usage*100, 'f', 1, 64),
			strconv.FormatUint(p.Tokens, 10), strconv.Itoa(int(p.Running)), strconv.FormatUint(p.LineID, 10)})
	}
	s.Path = string(path)
	c.Series = append(c.Series, s)
	c.Markers = append(c.Markers, Marker{X: ts.px(at), Text: "this request"})
	return c
}
