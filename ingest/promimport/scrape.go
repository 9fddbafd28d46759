package promimport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Scraper defaults, used for zero fields.
const (
	DefaultInterval      = 15 * time.Second
	DefaultScrapeTimeout = 10 * time.Second
	// DefaultMaxBodyBytes: an SGLang page is tens of KB; a few thousand
	// series with histograms stay well below this.
	DefaultMaxBodyBytes = 16 << 20
	// maxParallelScrapes bounds connections per round on big clusters.
	maxParallelScrapes = 16
)

// Target is one /metrics endpoint and the node its samples belong to.
type Target struct {
	Node string
	URL  string
}

// ParseTarget reads "node=URL".
func ParseTarget(s string) (Target, error) {
	node, raw, ok := strings.Cut(s, "=")
	node = strings.TrimSpace(node)
	if !ok || node == "" {
		return Target{}, fmt.Errorf("target %q: want node=URL", redact(s))
	}
	t := Target{Node: node, URL: strings.TrimSpace(raw)}
	return t, t.validate()
}

func (t Target) validate() error {
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("target %s: URL %q is not http(s)://host[:port]/path", t.Node, redact(t.URL))
	}
	if t.Node == "" {
		return fmt.Errorf("target %s: node name is empty", redact(t.URL))
	}
	return nil
}

// Scraper polls /metrics endpoints and writes their samples. A target that
// is down, slow or serves garbage is reported through Hooks and the log
// and never holds up the others.
type Scraper struct {
	Store   Store
	Targets []Target
	// Interval between the starts of two rounds; default DefaultInterval.
	Interval time.Duration
	// Timeout bounds one target's request including the body; default
	// DefaultScrapeTimeout, and never longer than Interval.
	Timeout time.Duration
	// MaxBodyBytes bounds one page; a larger page fails the scrape.
	MaxBodyBytes int64
	// Client makes the requests; nil means a plain client.
	Client *http.Client
	Logger *slog.Logger
	Hooks  Hooks
	// series are the metric series already stored by this value.
	series seriesSeen
}

// Run scrapes every target now and then once per Interval until ctx is
// cancelled, which is the normal way to stop it (it then returns nil). A
// failed write is reported and the next round goes ahead: a postmortem
// wants whatever can still be captured.
func (s *Scraper) Run(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	tick := time.NewTicker(s.interval())
	defer tick.Stop()
	for {
		if _, err := s.ScrapeOnce(ctx); err != nil && ctx.Err() == nil {
			s.logger().Error("writing scraped samples failed", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// ScrapeOnce scrapes every target in parallel and writes all samples in
// one insert. Per-target failures are in the results; the error is for the
// write (or a cancelled ctx) only.
func (s *Scraper) ScrapeOnce(ctx context.Context) ([]ScrapeResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	results := make([]ScrapeResult, len(s.Targets))
	rows := make([][]Row, len(s.Targets))
	sem := make(chan struct{}, maxParallelScrapes)
	var wg sync.WaitGroup
	for i, t := range s.Targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			rows[i], results[i] = s.scrapeTarget(ctx, t)
		}()
	}
	wg.Wait()

	if err := ctx.Err(); err != nil {
		// A cancelled round is incomplete: don't write half of it, and
		// don't count the targets it interrupted as failed.
		return results, err
	}
	var all []Row
	for i, r := range results {
		s.hooks().ScrapeDone(r)
		all = append(all, rows[i]...)
	}
	if len(all) == 0 {
		return results, nil
	}
	err := writeRows(ctx, s.Store, &s.series, all)
	s.hooks().WriteDone(len(all), err)
	return results, err
}

func (s *Scraper) check() error {
	if s.Store == nil {
		return errors.New("scraper: no store")
	}
	if len(s.Targets) == 0 {
		return errors.New("scraper: no targets")
	}
	for _, t := range s.Targets {
		if err := t.validate(); err != nil {
			return err
		}
	}
	return nil
}

func (s *Scraper) interval() time.Duration {
	if s.Interval <= 0 {
		return DefaultInterval
	}
	return s.Interval
}

func (s *Scraper) timeout() time.Duration {
	t := s.Timeout
	if t <= 0 {
		t = DefaultScrapeTimeout
	}
	return min(t, s.interval())
}

func (s *Scraper) maxBody() int64 {
	if s.MaxBodyBytes <= 0 {
		return DefaultMaxBodyBytes
	}
	return s.MaxBodyBytes
}

func (s *Scraper) client() *http.Client {
	if s.Client == nil {
		return http.DefaultClient
	}
	return s.Client
}

func (s *Scraper) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Scraper) hooks() Hooks {
	if s.Hooks == nil {
		return noHooks{}
	}
	return s.Hooks
}
