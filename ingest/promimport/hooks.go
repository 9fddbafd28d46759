package promimport

import (
	"sync"
	"time"
)

// Hooks receives the scraper's own metrics. The scraper keeps no global
// registry: a caller that exports metrics (Prometheus client, logs, tests)
// implements this. Methods are called from several goroutines.
type Hooks interface {
	// ScrapeDone reports one target's scrape, failed or not.
	ScrapeDone(ScrapeResult)
	// WriteDone reports one round's insert into ClickHouse.
	WriteDone(rows int, err error)
}

// ScrapeResult is the outcome of scraping one target once.
type ScrapeResult struct {
	Target   Target
	Start    time.Time
	Duration time.Duration
	// Samples is how many samples were parsed (and handed to the writer).
	Samples int
	// Malformed counts lines that could not be parsed; they are skipped.
	Malformed int
	// Err is why the scrape failed (no samples were kept), or nil.
	Err error
}

// Counters is a Hooks that totals everything, per node; useful for the
// CLI summary and tests.
type Counters struct {
	mu         sync.Mutex
	byNode     map[string]*NodeCounts
	rows       int
	writeFails int
}

// NodeCounts are one target's totals.
type NodeCounts struct {
	Scrapes, Failures, Samples, Malformed int
	LastErr                               string
}

// ScrapeDone implements Hooks.
func (c *Counters) ScrapeDone(r ScrapeResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byNode == nil {
		c.byNode = map[string]*NodeCounts{}
	}
	n := c.byNode[r.Target.Node]
	if n == nil {
		n = &NodeCounts{}
		c.byNode[r.Target.Node] = n
	}
	n.Scrapes++
	n.Samples += r.Samples
	n.Malformed += r.Malformed
	if r.Err != nil {
		n.Failures++
		n.LastErr = r.Err.Error()
	}
}

// WriteDone implements Hooks.
func (c *Counters) WriteDone(rows int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.writeFails++
		return
	}
	c.rows += rows
}

// Node returns a copy of one node's totals.
func (c *Counters) Node(node string) NodeCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.byNode[node]; n != nil {
		return *n
	}
	return NodeCounts{}
}

// Written returns the rows written and the failed writes so far.
func (c *Counters) Written() (rows, fails int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rows, c.writeFails
}

type noHooks struct{}

func (noHooks) ScrapeDone(ScrapeResult) {}
func (noHooks) WriteDone(int, error)    {}
