package simulate

import (
	"fmt"
	"time"
)

type role uint8

const (
	rolePrefill role = iota
	roleDecode
	roleUnified
)

func (r role) String() string {
	return [...]string{"prefill", "decode", "unified"}[r]
}

// sglVersion selects the log-format generation of a node (reference §b4).
type sglVersion uint8

const (
	v052  sglVersion = iota // "Prefill batch." with #unbootstrapped-req, no ms, no JSON request logs
	v0511                   // "Prefill batch," with #prealloc-req/#pending-token
	v0518                   // #bootstrap-req/#optimistic-req, KV line with dtype
)

func (v sglVersion) String() string { return [...]string{"0.5.2", "0.5.11", "0.5.18"}[v] }

// hasMetadataCheck: the simulator assumes the decode-side bootstrap_room
// echo check ("Context corruption detected") exists from 0.5.11 on; older
// decode nodes serve a colliding metadata buffer silently.
func (v sglVersion) hasMetadataCheck() bool { return v >= v0511 }

// boot is one engine start and the configuration in force until the next.
type boot struct {
	down    int64 // when the previous process stops (== at for the first boot)
	at      int64
	crash   bool // the previous process died with a traceback
	pool    int  // max_total_num_tokens per DP rank
	memFrac float64
	model   string
	quant   string
}

type rankState struct {
	pool      *pagePool // decode only
	busyUntil int64     // prefill/unified scheduler
	queue     int
	inflight  int // prefill: forward or transfer in progress
	running   int // decode: generating
	transfer  int // decode: allocated, waiting for KV
	prealloc  int // decode: waiting for pages
	retracted int
	usedTok   int // prefill: tokens held by in-flight requests
	active    bool
	metaCtr   int
	last      struct {
		seq    uint32
		tenant uint16
		room   uint64
		ok     bool
	}
}

type node struct {
	idx      int
	name     string
	role     role
	host     string
	url      string
	version  sglVersion
	logMS    bool
	jsonReq  bool
	reqLevel int
	glogYear bool
	canary   bool
	dp       int
	pageSize int
	tput     float64 // prefill tokens/s per DP rank, uncached tokens only

	boots   []boot
	bootIdx int
	up      bool
	epoch   uint32
	ranks   []*rankState
	warned  bool // warning_once for the waiting-timeout hint

	log, mc, pe *lineWriter
	met         *metricsBuf

	// Prometheus counters (reset at boot)
	cPrompt, cGen, cReqs, cAborted, cXferFail, cBootFail float64
	cCached                                              float64
}

func (n *node) cur() *boot { return &n.boots[n.bootIdx] }

// maxReqInputLen is SGLang's derived limit (tp_worker.get_worker_info):
// min(context_len-1, max_total_num_tokens-1) - 5.
func maxReqInputLen(pool, ctx int) int { return min(ctx-1, pool-1) - 5 }

func (n *node) limit() int { return maxReqInputLen(n.cur().pool, contextLen) }

func (n *node) bootstrapAddr() string { return n.host + ":8998" }

func (n *node) rankPrefix(rank int) string {
	if n.dp <= 1 {
		return ""
	}
	// DP attention with dp == tp == ep: the logging process of DP rank d has
	// tp_rank d. Order DP TP EP is valid for 0.5.2 and (PP=1) for 0.5.9+.
	return fmt.Sprintf(" DP%d TP%d EP%d", rank, rank, rank)
}

// buildCluster lays out nodes and their boot plans for a scenario.
func buildCluster(sc *scenario, rnd func() float64) []*node {
	day := int64(24 * time.Hour)
	span := int64(sc.days) * day
	var nodes []*node
	prefVersions := []sglVersion{v0511, v0511, v052, v0518, v0518}
	for i := 0; i < sc.prefill; i++ {
		n := &node{name: fmt.Sprintf("prefill-%d", i), role: rolePrefill, dp: prefillDP,
			host: fmt.Sprintf("10.0.0.%d", 11+i), tput: 16000 + 4000*rnd()}
		n.version = prefVersions[i%len(prefVersions)]
		n.canary = sc.canary && i == sc.prefill-1
		pool := sc.buggyPool
		first := int64(i) * int64(7*time.Second)
		if n.canary {
			n.version = v0518
			pool = canaryPool
			first = min(2*day+9*int64(time.Hour), span/6)
		}
		n.boots = []boot{{down: first, at: first, pool: pool, memFrac: 0.78, model: "zai-org/GLM-5.2-FP8", quant: "fp8"}}
		if n.canary {
			n.boots[0].memFrac = 0.88
		}
		nodes = append(nodes, n)
	}
	decVersions := []sglVersion{v052, v0511, v0518, v0518}
	for i := 0; i < sc.decode; i++ {
		n := &node{name: fmt.Sprintf("decode-%d", i), role: roleDecode, dp: decodeDP,
			host: fmt.Sprintf("10.0.1.%d", 11+i)}
		n.version = decVersions[i%len(decVersions)]
		first := int64(i)*int64(5*time.Second) + int64(3*time.Second)
		n.boots = []boot{{down: first, at: first, pool: sc.decodePool, memFrac: 0.85, model: "zai-org/GLM-5.2-FP8", quant: "fp8"}}
		nodes = append(nodes, n)
	}
	if sc.unified {
		n := &node{name: "unified-0", role: roleUnified, dp: 1, host: "10.0.2.11", version: v0518, tput: 12000}
		n.boots = []boot{{down: 0, at: int64(11 * time.Second), pool: unifiedPool, memFrac: 0.8, model: "zai-org/GLM-5.2-FP8", quant: "fp8"}}
		nodes = append(nodes, n)
	}
	for i, n := range nodes {
		n.idx = i
		n.pageSize = sc.pageSize
		n.url = "http://" + n.host + ":30000"
		n.reqLevel = 0
		n.logMS = n.version >= v0511 && i%2 == 0
		n.jsonReq = n.version == v0518 && i%3 == 0
		n.glogYear = i%2 == 1
	}
	planRedeploys(sc, nodes, day, span)
	// One text-mode node echoes prompts (--log-requests-level 2).
	for _, n := range nodes {
		if n.role == rolePrefill && !n.jsonReq && !n.canary && n.version != v052 {
			n.reqLevel = 2
			break
		}
	}
	return nodes
}

// planRedeploys adds the config changes and restarts of a scenario: a
// memory-fraction change that shrinks one prefill pool, a crash with a
// traceback, a decode weights/quantization change and a planned restart.
func planRedeploys(sc *scenario, nodes []*node, day, span int64) {
	at := func(frac float64) int64 { return int64(frac * float64(span)) }
	add := func(n *node, t int64, downFor time.Duration, crash bool, mut func(b *boot)) {
		b := n.boots[len(n.boots)-1]
		b.down, b.at, b.crash = t, t+int64(downFor), crash
		if mut != nil {
			mut(&b)
		}
		n.boots = append(n.boots, b)
	}
	var pref, dec []*node
	for _, n := range nodes {
		switch {
		case n.role == rolePrefill && !n.canary:
			pref = append(pref, n)
		case n.role == roleDecode:
			dec = append(dec, n)
		}
	}
	if len(pref) > 0 {
		add(pref[0], at(0.31)+int64(14*time.Hour)%day, 3*time.Minute, false, func(b *boot) {
			b.memFrac -= 0.02
			b.pool = b.pool * 25 / 26 / sc.pageSize * sc.pageSize
		})
	}
	if len(pref) > 1 {
		add(pref[1], at(0.46), 4*time.Minute, true, nil)
	}
	if len(pref) > 4 {
		add(pref[4], at(0.77), 2*time.Minute, false, nil)
	}
	if len(dec) > 2 {
		add(dec[2], at(0.62), 5*time.Minute, false, func(b *boot) {
			b.model, b.quant, b.memFrac = "zai-org/GLM-5.2-W4AFP8", "w4afp8", 0.87
			b.pool = 3_538_944
		})
	} else if len(dec) > 0 {
		add(dec[len(dec)-1], at(0.55), 3*time.Minute, false, nil)
	}
}
