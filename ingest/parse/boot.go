package parse

import (
	"fmt"
	"hash/fnv"
	"time"
)

// BootTracker folds the startup facts of one source (server_args, KV pool,
// limits, markers; §a) into one BootFacts per engine boot for node_boots,
// a ReplacingMergeTree(facts): every fact returns the accumulated record
// with a higher Facts count, so the last upsert wins.
//
// A boot starts at the first fact, at every server_args line (a restarted
// engine logs it first), and at a limits or KV-allocation line that comes
// after a batch line (a restart whose server_args line was not captured).
type BootTracker struct {
	cur      BootFacts
	active   bool
	sawBatch bool
}

// maxBootOffsets bounds the offsets kept per boot (one per DP/TP rank line).
const maxBootOffsets = 4096

// Observe folds p (and any glued messages in p.More) found at byte offset
// off. It returns the current boot and true when p carried a startup fact.
// Batch lines only mark that the engine is serving.
func (t *BootTracker) Observe(p Parsed, off int64) (BootFacts, bool) {
	changed := false
	for i := -1; i < len(p.More); i++ { // p, then the messages glued to it
		x := &p
		if i >= 0 {
			x = &p.More[i]
		}
		switch {
		case x.Kind == KindBatch:
			t.sawBatch = true
		case x.Kind == KindBoot && x.Boot != nil && x.Status == StatusParsed:
			t.add(x.Boot, x.TS, off)
			changed = true
		}
	}
	if !changed {
		return BootFacts{}, false
	}
	return t.Current(), true
}

// Current returns a copy of the boot being accumulated.
func (t *BootTracker) Current() BootFacts {
	c := t.cur
	c.ArgKeys = append([]string(nil), c.ArgKeys...)
	c.ArgValues = append([]string(nil), c.ArgValues...)
	c.Offsets = append([]int64(nil), c.Offsets...)
	return c
}

func (t *BootTracker) add(f *BootFacts, ts time.Time, off int64) {
	newBoot := !t.active || f.Fact == "server_args" ||
		((f.Fact == "limits" || f.Fact == "kv_allocated") && t.sawBatch)
	if newBoot {
		t.cur = BootFacts{Fact: "boot", Ranks: NoRanks}
		t.active, t.sawBatch = true, false
	}
	c := &t.cur
	if c.BootTS.IsZero() {
		c.BootTS = ts
	}
	switch f.Fact {
	case "server_args":
		c.ArgKeys, c.ArgValues = f.ArgKeys, f.ArgValues
		c.ModelPath, c.DisaggregationMode, c.TransferBackend = f.ModelPath, f.DisaggregationMode, f.TransferBackend
		c.PageSize, c.TPSize, c.DPSize, c.PPSize, c.EPSize = f.PageSize, f.TPSize, f.DPSize, f.PPSize, f.EPSize
		c.MemFractionStatic, c.AllowAutoTruncate, c.MaxTotalTokens = f.MemFractionStatic, f.AllowAutoTruncate, f.MaxTotalTokens
		// The limits line is authoritative for these; server_args only
		// fills them until it arrives.
		if c.ContextLen == 0 {
			c.ContextLen = f.ContextLen
		}
		if c.ChunkedPrefillSize == 0 {
			c.ChunkedPrefillSize = f.ChunkedPrefillSize
		}
		if c.MaxRunningRequests == 0 {
			c.MaxRunningRequests = f.MaxRunningRequests
		}
	case "limits":
		c.MaxTotalNumTokens, c.ContextLen = f.MaxTotalNumTokens, f.ContextLen
		c.MaxPrefillTokens, c.ChunkedPrefillSize, c.MaxRunningRequests = f.MaxPrefillTokens, f.ChunkedPrefillSize, f.MaxRunningRequests
		c.AvailMemGB = f.AvailMemGB
	case "kv_allocated":
		// The plain "KV Cache" pool is the one requests are admitted
		// against; other named caches only fill a gap.
		if f.KVPoolTokens != 0 && (f.KVCacheName == "KV Cache" || c.KVPoolTokens == 0) {
			c.KVPoolTokens, c.KVCacheName, c.KVDtype, c.KVSizeGB = f.KVPoolTokens, f.KVCacheName, f.KVDtype, f.KVSizeGB
		}
	}
	c.MaxReqInputLen = maxReqInputLen(c.ContextLen, c.MaxTotalNumTokens)
	c.Facts++
	if len(c.Offsets) < maxBootOffsets {
		c.Offsets = append(c.Offsets, off)
	}
	if len(c.Offsets) == 1 {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%d", c.BootTS.UnixNano(), c.Offsets[0])
		c.BootID = fmt.Sprintf("%016x", h.Sum64())
	}
}
