package ingest

import (
	"context"
	"fmt"
	"sync"
)

// nodeLister is a store that reads the latest checkpoint of every file
// source on a node in one query (internal/chstore).
type nodeLister interface {
	FileCheckpointsOnNode(ctx context.Context, node string) ([]Checkpoint, error)
}

// maxCachedPerNode bounds what a run holds of one node's checkpoints: a
// node with more file sources than this (years of rotated logs) is asked
// per file, as before.
const maxCachedPerNode = 20000

// candidateCache answers identify's checkpoint lookups from one read of
// each node's file checkpoints per run attempt, instead of one query per
// file: a few milliseconds of server CPU and up to 14 ms of wall each, the
// same for every file of a run that ingests hundreds.
//
// What the run itself saves is not re-read into the list: each saved
// checkpoint is remembered as dirty, and a lookup it could answer (its
// head is the one looked up, or shorter) reads the node again, as every
// lookup did before. A node's read clears only the dirty marks made
// before it started: a mark is made after its save returned, so that row
// was visible to the read; a mark made during the read may not have been.
// Another process's saves during the run are not seen, as they were not
// between a file's lookup and its read before; with source claims the
// lookup after a claim goes to the store (identify with a nil cache).
type candidateCache struct {
	store Store
	l     nodeLister

	mu    sync.Mutex
	seq   uint64
	nodes map[string]*nodeCands
}

type nodeCands struct {
	// loading is closed when the node's read under way ends.
	loading chan struct{}
	loaded  bool
	direct  bool // too many to hold: ask the store per lookup
	cps     []Checkpoint
	dirty   []dirtyHead
}

// dirtyHead is the head of a checkpoint saved since the node was read.
type dirtyHead struct {
	seq    uint64
	len    uint32
	digest string
}

// newCandidateCache returns a cache over s, or nil when s cannot list a
// node's checkpoints (then every lookup asks, as before).
func newCandidateCache(s Store) *candidateCache {
	l, ok := s.(nodeLister)
	if !ok {
		return nil
	}
	return &candidateCache{store: s, l: l, nodes: map[string]*nodeCands{}}
}

// lookup returns what FileCheckpointCandidates would: node's file
// checkpoints whose head is headLen bytes with headDigest, or shorter.
// One read of a node is under way at a time: the run's files look up
// concurrently, and the others wait for it.
func (c *candidateCache) lookup(ctx context.Context, node string, headLen uint32, headDigest string) ([]Checkpoint, error) {
	c.mu.Lock()
	n := c.nodes[node]
	if n == nil {
		n = &nodeCands{}
		c.nodes[node] = n
	}
	for n.loading != nil {
		wait := n.loading
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.mu.Lock()
	}
	if n.direct {
		c.mu.Unlock()
		return c.store.FileCheckpointCandidates(ctx, node, headLen, headDigest)
	}
	if n.loaded && !n.stale(headLen, headDigest) {
		out := matching(n.cps, headLen, headDigest)
		c.mu.Unlock()
		return out, nil
	}
	start := c.seq
	done := make(chan struct{})
	n.loading = done
	c.mu.Unlock()

	cps, err := c.l.FileCheckpointsOnNode(ctx, node)

	c.mu.Lock()
	defer c.mu.Unlock()
	n.loading = nil
	close(done)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	n.loaded, n.cps = true, cps
	if len(cps) > maxCachedPerNode {
		n.direct, n.cps = true, nil
	}
	kept := n.dirty[:0]
	for _, d := range n.dirty {
		if d.seq > start {
			kept = append(kept, d)
		}
	}
	n.dirty = kept
	return matching(cps, headLen, headDigest), nil
}

// saved marks the file checkpoints of a commit as dirty; called once the
// save has returned, whether or not it failed (a failed save may have
// stored some rows).
func (c *candidateCache) saved(list []checkpoint) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cp := range list {
		if cp.File == nil {
			continue
		}
		n := c.nodes[cp.Node]
		if n == nil {
			n = &nodeCands{}
			c.nodes[cp.Node] = n
		}
		c.seq++
		n.dirty = append(n.dirty, dirtyHead{seq: c.seq, len: cp.File.HeadLen, digest: cp.File.HeadDigest})
	}
}

// stale reports whether a checkpoint saved since the node was read could
// be among a lookup's candidates.
func (n *nodeCands) stale(headLen uint32, headDigest string) bool {
	for _, d := range n.dirty {
		if d.len < headLen || (d.len == headLen && d.digest == headDigest) {
			return true
		}
	}
	return false
}

// matching filters cps as FileCheckpointCandidates' query does. Each
// comes with a File of its own: the caller's checkpoint may be changed as
// the file is read, the cached one must not.
func matching(cps []Checkpoint, headLen uint32, headDigest string) []Checkpoint {
	var out []Checkpoint
	for _, cp := range cps {
		if f := cp.File; f != nil && (f.HeadLen < headLen || (f.HeadLen == headLen && f.HeadDigest == headDigest)) {
			fc := *f
			cp.File = &fc
			out = append(out, cp)
		}
	}
	return out
}
