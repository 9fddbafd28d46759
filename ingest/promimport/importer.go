package promimport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// DefaultQuery selects every SGLang series.
const DefaultQuery = `{__name__=~"sglang:.*"}`

// Defaults for Range and Importer fields left zero.
const (
	DefaultStep        = 30 * time.Second
	DefaultNodeLabel   = "instance"
	DefaultCallTimeout = 2 * time.Minute
	// DefaultMaxResponseBytes bounds one query_range answer. Series are
	// streamed to ClickHouse, but a runaway selector should fail clearly
	// rather than read without end.
	DefaultMaxResponseBytes = 1 << 30
)

// Range says what to copy out of Prometheus.
type Range struct {
	// Queries are PromQL selectors; default DefaultQuery. They must keep
	// the metric name (rate(), sum() and other functions drop it).
	Queries []string
	// From and To bound the evaluation; both ends are evaluated.
	From, To time.Time
	// Step is the evaluation resolution; default DefaultStep. Use the
	// scrape interval to copy every sample.
	Step time.Duration
	// NodeLabel names the label that identifies the node; default
	// DefaultNodeLabel.
	NodeLabel string
	// NodeMap renames NodeLabel values (e.g. "10.0.1.1:30000" → "prefill-0")
	// to the node names the logs use. Unmapped values are kept as they are.
	NodeMap map[string]string
}

// Importer copies series from a Prometheus server into metric_samples.
type Importer struct {
	Store Store
	// Client makes the HTTP calls; nil means a plain client. Per-call
	// deadlines come from CallTimeout, not from the client.
	Client *http.Client
	// CallTimeout bounds one query_range call; default DefaultCallTimeout.
	CallTimeout time.Duration
	// MaxPoints is the most evaluation points per series in one call;
	// default MaxPointsPerSeries. Longer windows are split.
	MaxPoints int
	// MaxResponseBytes bounds one answer; default DefaultMaxResponseBytes.
	MaxResponseBytes int64
	Logger           *slog.Logger
	// series are the metric series already stored by this value.
	series seriesSeen
}

// ImportStats says what an import did.
type ImportStats struct {
	Calls   int `json:"calls"`
	Series  int `json:"series"`  // distinct (node, series) pairs
	Samples int `json:"samples"` // rows written, NaN included
	// NoNode counts series without the node label; their rows have an
	// empty node.
	NoNode   int      `json:"no_node"`
	Warnings []string `json:"warnings,omitempty"` // Prometheus' warnings, deduplicated
}

// ImportRange runs every query over r's window against the Prometheus at
// promURL (its base URL, e.g. http://prom:9090 or http://host/prometheus)
// and writes the samples. Series are written as each call completes, so a
// failure leaves earlier calls' rows in place; rerunning is safe because
// rows are keyed.
func (im *Importer) ImportRange(ctx context.Context, promURL string, r Range) (ImportStats, error) {
	var st ImportStats
	r, err := r.withDefaults()
	if err != nil {
		return st, err
	}
	base, err := url.Parse(promURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return st, fmt.Errorf("prometheus URL %q: want http(s)://host[:port][/prefix]", redact(promURL))
	}
	c := &promClient{base: base, http: im.Client, timeout: im.CallTimeout, maxBytes: im.MaxResponseBytes}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.timeout <= 0 {
		c.timeout = DefaultCallTimeout
	}
	if c.maxBytes <= 0 {
		c.maxBytes = DefaultMaxResponseBytes
	}
	maxPoints := im.MaxPoints
	if maxPoints <= 0 || maxPoints > MaxPointsPerSeries {
		maxPoints = MaxPointsPerSeries
	}
	log := im.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	windows := splitWindow(r.From, r.To, r.Step, maxPoints)
	// A long window at a fine step means many calls; say so before they start.
	log.Info("importing from prometheus", slog.String("url", base.Redacted()), slog.Int("queries", len(r.Queries)),
		slog.Int("calls", len(r.Queries)*len(windows)), slog.Time("from", r.From), slog.Time("to", r.To),
		slog.Duration("step", r.Step))
	type seriesKey struct {
		node string
		id   uint64
	}
	seen := map[seriesKey]bool{}
	warned := map[string]bool{}
	for _, q := range r.Queries {
		source := "prometheus " + base.Redacted() + " query=" + q
		for _, w := range windows {
			var rows []Row
			warnings, err := c.queryRange(ctx, q, w, r.Step, func(s *promSeries) error {
				name, sample, err := seriesSample(s)
				if err != nil {
					return fmt.Errorf("query %q: %w", q, err)
				}
				node, ok := s.Metric[r.NodeLabel]
				if mapped, found := r.NodeMap[node]; found {
					node = mapped
				}
				key := seriesKey{node, sample.SeriesID}
				if !seen[key] {
					seen[key] = true
					st.Series++
					if !ok {
						st.NoNode++
						log.Warn("series has no node label; node left empty",
							slog.String("metric", name), slog.String("node_label", r.NodeLabel))
					}
				}
				for _, p := range s.Values {
					sm := sample
					sm.TS = time.UnixMilli(p.Ms).UTC()
					sm.TSMs = p.Ms
					sm.Value = p.Value
					rows = append(rows, Row{Node: node, Source: source, Sample: sm})
				}
				// Flush inside the stream so a huge answer is never held whole.
				if len(rows) >= maxBatchRows {
					if err := writeRows(ctx, im.Store, &im.series, rows); err != nil {
						return err
					}
					st.Samples += len(rows)
					rows = rows[:0]
				}
				return nil
			})
			st.Calls++
			for _, w := range warnings {
				if !warned[w] {
					warned[w] = true
					st.Warnings = append(st.Warnings, w)
					log.Warn("prometheus warning", slog.String("query", q), slog.String("warning", shorten(w)))
				}
			}
			if err != nil {
				return st, fmt.Errorf("query %q over %s..%s: %w", q,
					w.start.Format(time.RFC3339), w.end.Format(time.RFC3339), err)
			}
			if err := writeRows(ctx, im.Store, &im.series, rows); err != nil {
				return st, err
			}
			st.Samples += len(rows)
			log.Debug("imported window", slog.String("query", q), slog.Time("start", w.start),
				slog.Time("end", w.end), slog.Int("rows", len(rows)))
		}
	}
	return st, nil
}

// seriesSample builds the sample template of one series: name, sorted
// labels and series id (the same id ingest/parse gives a file sample with
// the same labels).
func seriesSample(s *promSeries) (string, parse.MetricSample, error) {
	name := s.Metric["__name__"]
	if name == "" {
		return "", parse.MetricSample{}, errors.New("series without __name__: give plain selectors, functions such as rate() drop the metric name")
	}
	keys := make([]string, 0, len(s.Metric)-1)
	for k := range s.Metric {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = s.Metric[k]
	}
	return name, parse.MetricSample{Name: name, LabelKeys: keys, LabelValues: vals,
		SeriesID: parse.SeriesID(name, keys, vals)}, nil
}

func (r Range) withDefaults() (Range, error) {
	if len(r.Queries) == 0 {
		r.Queries = []string{DefaultQuery}
	}
	for _, q := range r.Queries {
		if strings.TrimSpace(q) == "" {
			return r, errors.New("empty query")
		}
	}
	if r.Step == 0 {
		r.Step = DefaultStep
	}
	if r.Step < time.Millisecond {
		return r, fmt.Errorf("step %s: must be at least 1ms", r.Step)
	}
	if r.NodeLabel == "" {
		r.NodeLabel = DefaultNodeLabel
	}
	switch {
	case r.From.IsZero() || r.To.IsZero():
		return r, errors.New("both from and to are required")
	case r.To.Before(r.From):
		return r, fmt.Errorf("to (%s) is before from (%s)", r.To.Format(time.RFC3339), r.From.Format(time.RFC3339))
	}
	// Prometheus works in milliseconds; align so windows stay on its grid.
	r.From = r.From.Truncate(time.Millisecond).UTC()
	r.To = r.To.Truncate(time.Millisecond).UTC()
	return r, nil
}

// redact hides a password in a URL that may not even parse.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		return "…" + raw[i:]
	}
	return raw
}
