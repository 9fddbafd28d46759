package promimport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// acceptHeader asks for the classic text format: SGLang's prometheus_client
// would otherwise be free to pick OpenMetrics, whose extra _created series
// are noise here. Both parse.
const acceptHeader = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// scrapeTarget fetches and parses one page. It never returns a partial
// page: a failure yields no rows.
func (s *Scraper) scrapeTarget(ctx context.Context, t Target) ([]Row, ScrapeResult) {
	start := time.Now().UTC()
	res := ScrapeResult{Target: t, Start: start}
	body, err := s.fetch(ctx, t)
	var rows []Row
	if err == nil {
		rows, res.Malformed, err = parsePage(body, t, start)
	}
	res.Duration = time.Since(start)
	res.Samples = len(rows)
	res.Err = err
	log := s.logger().With(slog.String("node", t.Node), slog.String("url", redact(t.URL)))
	switch {
	case err != nil:
		// err never carries body text, so logging it cannot leak a page.
		log.Warn("scrape failed", slog.Any("err", err), slog.Duration("took", res.Duration))
		return nil, res
	case res.Malformed > 0:
		log.Warn("skipped malformed metric lines", slog.Int("malformed", res.Malformed), slog.Int("samples", len(rows)))
	default:
		log.Debug("scraped", slog.Int("samples", len(rows)), slog.Duration("took", res.Duration))
	}
	return rows, res
}

func (s *Scraper) fetch(ctx context.Context, t Target) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", acceptHeader)
	req.Header.Set("User-Agent", "kvtrail-scraper")
	resp, err := s.client().Do(req)
	if err != nil {
		return nil, err // *url.Error: method, URL without password, cause
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// Drain a little so the connection can be reused; the body itself
		// is never reported.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	limit := s.maxBody()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("body exceeds %d bytes", limit)
	}
	return body, nil
}

// parsePage parses a text exposition page. Samples without a timestamp get
// the scrape's start time, as Prometheus does. Malformed lines are counted
// and skipped; a page with nothing but malformed lines is an error (an HTML
// page or a wrong port, most likely).
func parsePage(body []byte, t Target, scrapeTime time.Time) ([]Row, int, error) {
	p, err := parse.New(parse.FormatPrometheus, parse.ParseOptions{DefaultTime: scrapeTime.Truncate(time.Millisecond)})
	if err != nil {
		return nil, 0, err
	}
	source := "scrape " + redact(t.URL)
	var rows []Row
	malformed := 0
	lineNo := int64(0)
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		lineNo++
		res := p.Parse(parse.Record{Raw: line, LineNo: lineNo, Lines: 1})
		switch res.Status {
		case parse.StatusMalformed:
			malformed++
		case parse.StatusParsed:
			for _, m := range res.Metrics {
				rows = append(rows, Row{Node: t.Node, Source: source, Sample: m})
			}
		}
	}
	if len(rows) == 0 && malformed > 0 {
		return nil, malformed, fmt.Errorf("no samples, %d malformed lines: not a Prometheus text page", malformed)
	}
	return rows, malformed, nil
}
