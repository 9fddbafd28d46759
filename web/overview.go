package web

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// overviewStore is what the overview page needs.
type overviewStore interface {
	FindingBuckets(ctx context.Context) ([]FindingBucket, error)
	Fleet(ctx context.Context) ([]NodeLimits, error)
	Sources(ctx context.Context) ([]SourceRow, error)
	Gaps(ctx context.Context) ([]Gap, error)
	HighFindings(ctx context.Context, limit int) ([]Finding, error)
}

// newestHigh is how many HIGH findings the overview lists.
const newestHigh = 20

// Overview is the landing page.
type Overview struct {
	Buckets    []FindingBucket `json:"finding_buckets"`
	ByAnalyzer []analyzerCount `json:"findings_by_analyzer"`
	Fleet      []NodeLimits    `json:"fleet"`
	Sources    []SourceRow     `json:"sources"`
	Gaps       []Gap           `json:"gaps"`
	High       []Finding       `json:"newest_high"`
	Nodes      []nodeIngest    `json:"ingest_by_node"`
	Chart      *chart          `json:"-"`
}

type analyzerCount struct {
	Analyzer string `json:"analyzer"`
	High     uint64 `json:"high"`
	Medium   uint64 `json:"medium"`
	Low      uint64 `json:"low"`
	Other    uint64 `json:"other"`
}

func (s *server) overviewPage(c *gin.Context) {
	ctx := c.Request.Context()
	var o Overview
	var err error
	steps := []func() error{
		func() (e error) { o.Buckets, e = s.overview.FindingBuckets(ctx); return },
		func() (e error) { o.Fleet, e = s.overview.Fleet(ctx); return },
		func() (e error) { o.Sources, e = s.overview.Sources(ctx); return },
		func() (e error) { o.Gaps, e = s.overview.Gaps(ctx); return },
		func() (e error) { o.High, e = s.overview.HighFindings(ctx, newestHigh); return },
	}
	for _, step := range steps {
		if err = step(); err != nil {
			s.fail(c, err)
			return
		}
	}
	byA := map[string]*analyzerCount{}
	for _, b := range o.Buckets {
		a := byA[b.Analyzer]
		if a == nil {
			a = &analyzerCount{Analyzer: b.Analyzer}
			byA[b.Analyzer] = a
		}
		switch strings.ToUpper(b.Severity) {
		case "HIGH", "CRITICAL":
			a.High += b.N
		case "MEDIUM":
			a.Medium += b.N
		case "LOW":
			a.Low += b.N
		default:
			a.Other += b.N
		}
	}
	for _, a := range byA {
		o.ByAnalyzer = append(o.ByAnalyzer, *a)
	}
	sort.Slice(o.ByAnalyzer, func(i, j int) bool { return o.ByAnalyzer[i].Analyzer < o.ByAnalyzer[j].Analyzer })
	o.Chart = buildChart(o.Buckets)
	o.Nodes = ingestByNode(o.Sources)
	s.respond(c, "overview", "Overview", o)
}

// nodeIngest sums a node's sources: one row per node instead of one per
// file (a fleet writes hundreds of files).
type nodeIngest struct {
	Node       string    `json:"node"`
	Formats    []string  `json:"formats"`
	Sources    int       `json:"sources"`
	Lines      uint64    `json:"lines"`
	Unknown    uint64    `json:"unknown"`
	Malformed  uint64    `json:"malformed"`
	First      time.Time `json:"first_ts"`
	Last       time.Time `json:"last_ts"`
	Incomplete int       `json:"incomplete"`
	Pushed     int       `json:"pushed"`
}

func ingestByNode(rows []SourceRow) []nodeIngest {
	by := map[string]*nodeIngest{}
	var order []string
	for _, r := range rows {
		n := by[r.Node]
		if n == nil {
			n = &nodeIngest{Node: r.Node}
			by[r.Node] = n
			order = append(order, r.Node)
		}
		n.Sources++
		n.Lines, n.Unknown, n.Malformed = n.Lines+r.Lines, n.Unknown+r.Unknown, n.Malformed+r.Malformed
		if r.FirstTS.Unix() > 0 && (n.First.IsZero() || r.FirstTS.Before(n.First)) {
			n.First = r.FirstTS
		}
		if r.LastTS.After(n.Last) {
			n.Last = r.LastTS
		}
		if r.Incomplete() {
			n.Incomplete++
		}
		if r.Pushed() {
			n.Pushed++
		}
		found := false
		for _, f := range n.Formats {
			found = found || f == r.LogFormat
		}
		if !found {
			n.Formats = append(n.Formats, r.LogFormat)
		}
	}
	sort.Strings(order)
	out := make([]nodeIngest, len(order))
	for i, k := range order {
		out[i] = *by[k]
	}
	return out
}

// chart is a server-rendered SVG stacked bar chart: no script needed.
type chart struct {
	Width, Height int
	Bars          []chartBar
	Labels        []chartLabel
	Max           uint64
	Span          string
}

type chartBar struct {
	X, W  int
	Parts []chartPart
	Title string
}

type chartPart struct {
	Y, H  int
	Class string
}

type chartLabel struct {
	X    int
	Text string
}

// maxBars bounds the chart's width; hours are grouped into wider bars.
const maxBars = 60

func buildChart(buckets []FindingBucket) *chart {
	if len(buckets) == 0 {
		return nil
	}
	first, last := buckets[0].Hour, buckets[0].Hour
	for _, b := range buckets {
		if b.Hour.Before(first) {
			first = b.Hour
		}
		if b.Hour.After(last) {
			last = b.Hour
		}
	}
	hours := int(last.Sub(first)/time.Hour) + 1
	per := (hours + maxBars - 1) / maxBars
	n := (hours + per - 1) / per
	sev := []string{"sev-high", "sev-medium", "sev-low", "sev-other"}
	counts := make([][4]uint64, n)
	for _, b := range buckets {
		i := int(b.Hour.Sub(first)/time.Hour) / per
		k := 3
		switch strings.ToUpper(b.Severity) {
		case "HIGH", "CRITICAL":
			k = 0
		case "MEDIUM":
			k = 1
		case "LOW":
			k = 2
		}
		counts[i][k] += b.N
	}
	ch := &chart{Width: 900, Height: 180, Span: fmt.Sprintf("%d h per bar", per)}
	for _, c := range counts {
		ch.Max = max(ch.Max, c[0]+c[1]+c[2]+c[3])
	}
	plotH := 150
	bw := ch.Width / n
	for i, c := range counts {
		bar := chartBar{X: i * bw, W: max(bw-2, 1)}
		y := plotH
		var total uint64
		for k := 0; k < 4; k++ {
			if c[k] == 0 {
				continue
			}
			total += c[k]
			h := int(float64(c[k]) / float64(ch.Max) * float64(plotH-10))
			h = max(h, 1)
			y -= h
			bar.Parts = append(bar.Parts, chartPart{Y: y, H: h, Class: sev[k]})
		}
		start := first.Add(time.Duration(i*per) * time.Hour)
		bar.Title = fmt.Sprintf("%s: %d findings (HIGH %d, MEDIUM %d, LOW %d, other %d)", start.Format("2006-01-02 15:00"), total, c[0], c[1], c[2], c[3])
		ch.Bars = append(ch.Bars, bar)
		if i%max(n/6, 1) == 0 {
			ch.Labels = append(ch.Labels, chartLabel{X: i * bw, Text: start.Format("01-02 15h")})
		}
	}
	return ch
}
