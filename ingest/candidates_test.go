package ingest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// lookupCounting counts a run's checkpoint reads: per node (the cache's)
// and per file (identify's without it).
type lookupCounting struct {
	*chstore.Store
	perNode, perFile atomic.Int64
	// during, if set, runs inside each per-node read, before the query.
	during func()
}

func (c *lookupCounting) FileCheckpointsOnNode(ctx context.Context, node string) ([]ingest.Checkpoint, error) {
	c.perNode.Add(1)
	if c.during != nil {
		c.during()
	}
	return c.Store.FileCheckpointsOnNode(ctx, node)
}

func (c *lookupCounting) FileCheckpointCandidates(ctx context.Context, node string, headLen uint32, headDigest string) ([]ingest.Checkpoint, error) {
	c.perFile.Add(1)
	return c.Store.FileCheckpointCandidates(ctx, node, headLen, headDigest)
}

// noNodeList is a store that cannot read a node's checkpoints at once.
type noNodeList struct{ ingest.Store }

// A run reads each node's file checkpoints once, not once per file; a
// rerun resumes every file from them (all skipped) with one read per node
// again. A store that cannot list a node's gets the per-file query.
func TestCheckpointLookupsReadEachNodeOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var sources []ingest.Source
	for i := range 6 {
		p := filepath.Join(dir, fmt.Sprintf("app%d.log", i))
		writeLines(t, p, i*1000, i*1000+500)
		sources = append(sources, ingest.Source{Path: p, Format: "sglang", Node: fmt.Sprintf("n%d", i%3), Role: "decode"})
	}
	c := &lookupCounting{Store: testdb.New(t)}
	sum, err := ingest.New(c, ingest.Options{}).Ingest(ctx, sources)
	if err != nil {
		t.Fatal(err)
	}
	if got := sum.Total.Records; got != 3000 {
		t.Fatalf("%d records, want 3000", got)
	}
	if n, f := c.perNode.Load(), c.perFile.Load(); n != 3 || f != 0 {
		t.Fatalf("first run: %d node reads and %d file lookups, want 3 and 0", n, f)
	}

	c.perNode.Store(0)
	sum, err = ingest.New(c, ingest.Options{}).Ingest(ctx, sources)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sum.Sources {
		if r.State != "skipped" {
			t.Fatalf("rerun: %s %s, want skipped (its checkpoint was found)", r.Path, r.State)
		}
	}
	if n, f := c.perNode.Load(), c.perFile.Load(); n != 3 || f != 0 {
		t.Fatalf("rerun: %d node reads and %d file lookups, want 3 and 0", n, f)
	}

	c2 := &lookupCounting{Store: testdb.New(t)}
	if _, err := ingest.New(noNodeList{c2}, ingest.Options{}).Ingest(ctx, sources); err != nil {
		t.Fatal(err)
	}
	if n, f := c2.perNode.Load(), c2.perFile.Load(); n != 0 || f != int64(len(sources)) {
		t.Fatalf("without the node read: %d node reads and %d file lookups, want 0 and %d", n, f, len(sources))
	}
}

// The cache answers a lookup as the store would when the run itself has
// saved a checkpoint the lookup could match: it reads the node again. A
// save it is told of while a node's read is under way may have missed
// that read, so the next matching lookup reads again too. Saves whose head
// cannot match a lookup do not cost it a read, and a caller changing the
// checkpoint it got does not change the cache.
func TestCandidateCacheFollowsTheRunsSaves(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	writeLines(t, a, 0, 500)
	writeLines(t, b, 5000, 5500)
	headOf := func(p string) []byte {
		t.Helper()
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return data[:4096]
	}
	c := &lookupCounting{Store: testdb.New(t)}
	cache := ingest.NewCandidateCache(c)
	lookup := func(p string) []ingest.Checkpoint {
		t.Helper()
		cps, err := cache.Lookup(ctx, "n1", headOf(p))
		if err != nil {
			t.Fatal(err)
		}
		return cps
	}
	if cps := lookup(a); len(cps) != 0 || c.perNode.Load() != 1 {
		t.Fatalf("empty database: %d candidates after %d reads, want 0 after 1", len(cps), c.perNode.Load())
	}

	// a is ingested and its checkpoint saved, as a commit of the run would.
	res, err := ingest.New(c.Store, ingest.Options{}).IngestSource(ctx, src(a))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := c.Store.FileCheckpointsOnNode(ctx, "n1")
	if err != nil || len(saved) != 1 {
		t.Fatalf("saved checkpoints: %d, %v; want 1", len(saved), err)
	}
	cache.Saved(saved)
	cps := lookup(a)
	if len(cps) != 1 || cps[0].SourceID != res.SourceID || cps[0].Offset != saved[0].Offset || c.perNode.Load() != 2 {
		t.Fatalf("after the save: %+v after %d reads; want a's checkpoint after 2", cps, c.perNode.Load())
	}
	if cps := lookup(b); len(cps) != 0 || c.perNode.Load() != 2 {
		t.Fatalf("another head: %d candidates after %d reads; want 0 from the cache", len(cps), c.perNode.Load())
	}
	cps[0].File.PrefixLen = 1
	if again := lookup(a); again[0].File.PrefixLen != saved[0].File.PrefixLen {
		t.Fatal("a caller's change to its checkpoint reached the cache")
	}

	// Told of a save while a read is under way: the read may have missed
	// it, so the next lookup it could answer reads again.
	c.during = func() { cache.Saved(saved) }
	cache.Saved(saved)
	lookup(a) // reads, and is told of a save meanwhile
	c.during = nil
	if c.perNode.Load() != 3 {
		t.Fatalf("%d reads, want 3", c.perNode.Load())
	}
	lookup(a)
	if c.perNode.Load() != 4 {
		t.Fatalf("a save told during the read did not cost the next lookup a read (%d reads, want 4)", c.perNode.Load())
	}
	lookup(a)
	lookup(b)
	if c.perNode.Load() != 4 {
		t.Fatalf("%d reads after the marks were read, want 4", c.perNode.Load())
	}
}
