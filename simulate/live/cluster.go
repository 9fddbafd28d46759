// Package live is `kvtrail simulate serve`: a small prefill/decode cluster
// that answers OpenAI-compatible chat completions while it writes SGLang,
// Mooncake and gateway logs live (to files and/or kvtrail's Loki push
// endpoint), with the switches of the #30233 class: the prefill KV pool
// against the context length, the SGLang version (fixed from 0.5.20),
// "fixed" outright, and deferred KV release.
//
// The decode node has a real paged pool (pool.go). On the #30233 path a
// prompt between the prefill's max_req_input_len and the context length is
// rejected by the prefill scheduler, replaced by a 1-token placeholder and
// still handed to decode, which reserves pages for the whole prompt but
// receives one token: what it "generates" is read from the stale pages, so
// the answer really carries text of earlier requests (including other
// probes' markers). Tokens are whitespace-separated words.
package live

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Engine is one boot's configuration of the prefill node: what the
// switches set.
type Engine struct {
	// PrefillPool is the prefill's max_total_num_tokens.
	PrefillPool int `json:"prefill_pool"`
	// ContextLen is the served context length (both nodes).
	ContextLen int `json:"context_len"`
	// Version is the SGLang version the nodes report (version line).
	Version string `json:"version"`
	// Fixed makes the prefill refuse over-limit prompts with a 400
	// whatever the version says.
	Fixed bool `json:"fixed"`
	// DeferredRelease is the decode's deferred KV release switch. It is
	// logged (environment line) for posture; the live cluster has no
	// abort-mid-transfer path for it to change.
	DeferredRelease bool `json:"deferred_release"`
}

// Config is the cluster.
type Config struct {
	Engine   Engine
	PageSize int
	// DecodePool is the decode's max_total_num_tokens (at least the
	// context length).
	DecodePool int
	// LogDir, if set, receives <node>.log files.
	LogDir string
	// PushURL, if set, is a Loki push endpoint (kvtrail serve's
	// /loki/api/v1/push) and PushToken its bearer token.
	PushURL, PushToken string
	PushEvery          time.Duration
	// Tenants and Rate drive background traffic (requests per second over
	// all tenants); LongShare of them are long prompts near the context
	// length (the ones the bug turns into leaks).
	Tenants   int
	Rate      float64
	LongShare float64
	Log       *slog.Logger
}

// fixedIn is the first release with the #30233 engine fix
// (posture/knownbugs.json).
const fixedIn = "0.5.20"

// Cluster is a running live cluster.
type Cluster struct {
	cfg  Config
	log  *slog.Logger
	sink sink

	mu     sync.Mutex
	eng    Engine
	pool   *pool
	boots  int
	stats  Stats
	prompt map[string]int // tenant -> requests (for names)
}

// Stats is what /admin/state reports.
type Stats struct {
	Requests   int       `json:"requests"`
	Rejected   int       `json:"rejected"`
	Leaked     int       `json:"leaked"`
	FirstLeak  time.Time `json:"first_leak"`
	LastBoot   time.Time `json:"last_boot"`
	Background int       `json:"background"`
}

// Nodes of the live cluster and the endpoints its gateway log names them by.
const (
	prefillNode = "live-prefill-0"
	decodeNode  = "live-decode-0"
	gatewayNode = "live-gateway-0"
	mooncakeLog = "live-prefill-0-mooncake"
	prefillHost = "10.77.1.11"
	decodeHost  = "10.77.2.11"
	prefillPort = 30000
	decodePort  = 30001
)

// New validates cfg, opens the sinks and boots both nodes (their startup
// lines are the first lines written).
func New(cfg Config) (*Cluster, error) {
	if cfg.PageSize <= 0 {
		cfg.PageSize = 16
	}
	e := cfg.Engine
	if e.ContextLen < 64 || e.PrefillPool < 64 {
		return nil, fmt.Errorf("live: context length and prefill pool must be at least 64 tokens")
	}
	if cfg.DecodePool < e.ContextLen {
		cfg.DecodePool = 4 * e.ContextLen
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var sinks multiSink
	if cfg.LogDir != "" {
		fs, err := newFileSink(cfg.LogDir)
		if err != nil {
			return nil, err
		}
		sinks = append(sinks, fs)
	}
	if cfg.PushURL != "" {
		every := cfg.PushEvery
		if every <= 0 {
			every = 250 * time.Millisecond
		}
		sinks = append(sinks, newLokiSink(cfg.PushURL, cfg.PushToken, every, cfg.Log))
	}
	c := &Cluster{cfg: cfg, log: cfg.Log, sink: sinks, pool: newPool(cfg.DecodePool, cfg.PageSize), prompt: map[string]int{}}
	c.mu.Lock()
	c.bootLocked(e, true)
	c.mu.Unlock()
	return c, nil
}

// Close flushes the logs.
func (c *Cluster) Close() { c.sink.close() }

// buggy reports whether the #30233 path is open on this boot.
func (e Engine) buggy() bool {
	if e.Fixed {
		return false
	}
	return versionLess(e.Version, fixedIn)
}

// maxReqInputLen is SGLang's derived limit (reference §a4).
func (e Engine) maxReqInputLen() int { return min(e.ContextLen-1, e.PrefillPool-1) - 5 }

// Reboot restarts the prefill (and, for the version and deferred-release
// switches, the decode) with e: new boot lines are written, as after a
// real deployment change.
func (c *Cluster) Reboot(e Engine) error {
	if e.ContextLen < 64 || e.PrefillPool < 64 {
		return fmt.Errorf("live: context length and prefill pool must be at least 64 tokens")
	}
	if e.ContextLen > c.cfg.DecodePool {
		return fmt.Errorf("live: context length %d exceeds the decode pool %d", e.ContextLen, c.cfg.DecodePool)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bootLocked(e, e.Version != c.eng.Version || e.DeferredRelease != c.eng.DeferredRelease || e.ContextLen != c.eng.ContextLen)
	return nil
}

func (c *Cluster) bootLocked(e Engine, decodeToo bool) {
	c.eng = e
	c.boots++
	now := time.Now().UTC()
	c.stats.LastBoot = now
	c.bootNode(now, prefillNode, "prefill", prefillHost, prefillPort, e.PrefillPool, e)
	if decodeToo {
		c.bootNode(now, decodeNode, "decode", decodeHost, decodePort, c.cfg.DecodePool, e)
	}
	c.emit(stream{mooncakeLog, "mooncake", "mooncake-glog"}, now, glogTime(now)+" 4242 transfer_engine.cpp:412] Transfer Engine RPC using P2P handshake, listening on "+prefillHost+":15001")
	c.log.Info("live cluster booted", slog.Int("prefill_pool", e.PrefillPool), slog.Int("context_len", e.ContextLen),
		slog.String("version", e.Version), slog.Bool("fixed", e.Fixed), slog.Bool("deferred_release", e.DeferredRelease),
		slog.Bool("bug_open", e.buggy() && e.maxReqInputLen()+6 < e.ContextLen))
}

// bootNode writes a node's startup block (reference §a1–§a5), preceded by
// what operators' launch wrappers print: the package version and the
// SGLANG_ environment (SGLang itself logs neither).
func (c *Cluster) bootNode(t time.Time, node, role, host string, port, poolTokens int, e Engine) {
	s := stream{node, role, "sglang"}
	deferred := "0"
	if e.DeferredRelease {
		deferred = "1"
	}
	c.emit(s, t, pyTime(t, "")+" sglang=="+e.Version)
	c.emit(s, t, pyTime(t, "")+" SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=300")
	c.emit(s, t, pyTime(t, "")+" SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE="+deferred)
	c.emit(s, t, pyTime(t, "")+fmt.Sprintf(" server_args=ServerArgs(model_path='live/sim-model', tokenizer_path='live/sim-model', host='%s', port=%d, "+
		"mem_fraction_static=0.8, max_total_tokens=None, chunked_prefill_size=8192, max_prefill_tokens=16384, page_size=%d, tp_size=1, pp_size=1, dp_size=1, "+
		"allow_auto_truncate=False, log_requests=True, log_requests_level=0, enable_metrics=True, disaggregation_mode='%s', "+
		"disaggregation_transfer_backend='mooncake', disaggregation_bootstrap_port=8998)", host, port, c.cfg.PageSize, role))
	c.emit(s, t, pyTime(t, " TP0")+fmt.Sprintf(" KV Cache is allocated. dtype: torch.bfloat16, #tokens: %d, KV size: %.2f GB", poolTokens, float64(poolTokens)/65536))
	c.emit(s, t, pyTime(t, " TP0")+fmt.Sprintf(" max_total_num_tokens=%d, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=256, context_len=%d, available_gpu_mem=10.00 GB",
		poolTokens, e.ContextLen))
	c.emit(s, t, pyTime(t, "")+" The server is fired up and ready to roll!")
}

func (c *Cluster) emit(s stream, t time.Time, line string) { c.sink.write(s, t, line) }

// State returns the counters and the current engine.
func (c *Cluster) State() (Engine, Stats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.eng, c.stats
}

var markerRE = regexp.MustCompile(`KVT-[0-9a-f]{16}`)

// result is one request's outcome.
type result struct {
	status           int
	text, errMsg     string
	prompt, complete int
	leaked           bool
}

// Serve runs one request through gateway, prefill and decode, writing
// every node's lines, and returns what the client gets.
func (c *Cluster) serve(tenant, prompt string, maxTokens int, streaming bool) result {
	words := strings.Fields(prompt)
	n := len(words)
	t0 := time.Now().UTC()
	reqID := "chatcmpl-" + alnum(24)
	room := randRoom()
	prid, drid := hexID(16), hexID(16)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Requests++
	e := c.eng
	pf, dc := stream0(prefillNode, "prefill"), stream0(decodeNode, "decode")
	c.emit(pf, t0, pyTime(t0, "")+" Receive: obj="+objText(prid, room))
	c.emit(dc, t0, pyTime(t0, "")+" Receive: obj="+objText(drid, room))
	gw := gatewayLine{TS: t0.Format(time.RFC3339Nano), RequestID: reqID, Tenant: tenant, Model: "sim-model",
		PrefillEndpoint: fmt.Sprintf("http://%s:%d", prefillHost, prefillPort), DecodeEndpoint: fmt.Sprintf("http://%s:%d", decodeHost, decodePort),
		Room: room, Gateway: gatewayNode, Mode: "pd", Method: "POST", Path: "/v1/chat/completions", Stream: streaming}
	finishGW := func(r result) result {
		end := time.Now().UTC()
		gw.Status, gw.Prompt, gw.Completion = r.status, r.prompt, r.complete
		gw.Duration = float64(end.Sub(t0).Microseconds()) / 1000
		if r.status == http.StatusOK {
			gw.TTFT = gw.Duration
			gw.PrefillRID, gw.DecodeRID = prid, drid
		}
		b, _ := json.Marshal(gw)
		c.emit(stream{gatewayNode, "gateway", "gateway-json"}, end, string(b))
		return r
	}
	if n >= e.ContextLen {
		// Tokenizer check (§c2): both workers answer 400.
		msg := fmt.Sprintf("The input (%d tokens) is longer than the model's context length (%d tokens).", n, e.ContextLen)
		c.stats.Rejected++
		return finishGW(result{status: http.StatusBadRequest, errMsg: msg})
	}
	limit := e.maxReqInputLen()
	placeholder := false
	if n >= limit {
		t := time.Now().UTC()
		msg := fmt.Sprintf("Input length (%d tokens) exceeds the maximum allowed length (%d tokens). Use a shorter input or enable --allow-auto-truncate.", n, limit)
		c.emit(pf, t, pyTime(t, " TP0")+" "+msg+", self.rid='"+prid+"'")
		if !e.buggy() {
			c.emit(pf, t, pyTime(t, "")+" Finish: obj="+objText(prid, room)+", out="+metaAbort(prid, msg, 1, t.Sub(t0)))
			c.emit(dc, t, pyTime(t, " TP0")+fmt.Sprintf(" Decode transfer failed for request rank=0 decode_req.req.rid='%s' decode_req.req.bootstrap_room=%d with exception KVTransferError(bootstrap_room=%d): Aborted by AbortReq.", drid, room, room))
			c.emit(dc, t, pyTime(t, "")+" Finish: obj="+objText(drid, room)+", out="+metaAbort(drid, "Aborted by AbortReq.", n, t.Sub(t0)))
			c.stats.Rejected++
			return finishGW(result{status: http.StatusBadRequest, errMsg: msg})
		}
		placeholder = true
	}
	// Prefill computes the prompt (or the 1-token placeholder) and sends it.
	sent := words
	if placeholder {
		sent = []string{"<|pad|>"}
	}
	tp := time.Now().UTC()
	c.emit(pf, tp, pyTime(tp, " TP0")+fmt.Sprintf(" Prefill batch, #new-seq: 1, #new-token: %d, #cached-token: 0, token usage: 0.01, #running-req: 0, #queue-req: 0, #pending-token: 0, #bootstrap-req: 0, #inflight-req: 1, #optimistic-req: 0, cuda graph: False, input throughput (token/s): 10000.00", len(sent)))
	c.emit(pf, tp, pyTime(tp, "")+" Finish: obj="+objText(prid, room)+", out="+metaLength(prid, len(sent), tp.Sub(t0)))
	// Decode reserves pages for the whole prompt plus the answer, gets the
	// transferred KV and generates.
	pages, ok := c.pool.alloc(n + maxTokens)
	if !ok {
		return finishGW(result{status: http.StatusServiceUnavailable, errMsg: "decode KV pool exhausted"})
	}
	c.pool.write(pages, sent, drid)
	// Attention reads the prompt's pages (the answer's are not written yet).
	ctxWords, stale := c.pool.read(pages[:(n+c.cfg.PageSize-1)/c.cfg.PageSize], drid)
	ctxWords = ctxWords[:min(len(ctxWords), n)]
	out := generate(ctxWords, maxTokens)
	c.pool.write(pages, append(append([]string{}, words[:len(sent)]...), out...), drid) // answer tokens land after the context
	c.pool.release(pages)
	td := time.Now().UTC()
	c.emit(dc, td, pyTime(td, " TP0")+fmt.Sprintf(" Decode batch, #running-req: 1, #token: %d, token usage: 0.01, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 0", n))
	c.emit(dc, td, pyTime(td, "")+" Finish: obj="+objText(drid, room)+", out="+metaStop(drid, n, len(out), td.Sub(t0)))
	r := result{status: http.StatusOK, text: strings.Join(out, " "), prompt: n, complete: len(out)}
	if placeholder && stale {
		r.leaked = true
		c.stats.Leaked++
		if c.stats.FirstLeak.IsZero() {
			c.stats.FirstLeak = td
		}
	}
	return finishGW(r)
}

func stream0(node, role string) stream { return stream{node, role, "sglang"} }

// generate is the "model": it follows the canary instruction (repeat the
// code) when its context holds a marker, else it continues the context.
// On stale pages the context is other requests' tokens, so the answer is
// their text.
func generate(ctx []string, maxTokens int) []string {
	for _, w := range ctx {
		if m := markerRE.FindString(w); m != "" {
			return []string{m}
		}
	}
	var out []string
	for _, w := range ctx {
		if w == "<|pad|>" {
			continue
		}
		out = append(out, w)
		if len(out) >= maxTokens {
			break
		}
	}
	if len(out) == 0 {
		out = []string{"ok"}
	}
	return out
}

type gatewayLine struct {
	TS              string  `json:"ts"`
	RequestID       string  `json:"request_id"`
	Tenant          string  `json:"tenant"`
	Model           string  `json:"model"`
	Status          int     `json:"status"`
	Prompt          int     `json:"prompt_tokens"`
	Completion      int     `json:"completion_tokens"`
	Cached          int     `json:"cached_tokens"`
	TTFT            float64 `json:"ttft_ms"`
	Duration        float64 `json:"duration_ms"`
	PrefillEndpoint string  `json:"prefill_endpoint"`
	DecodeEndpoint  string  `json:"decode_endpoint"`
	Room            uint64  `json:"bootstrap_room"`
	PrefillRID      string  `json:"prefill_rid,omitempty"`
	DecodeRID       string  `json:"decode_rid,omitempty"`
	Gateway         string  `json:"gateway"`
	Mode            string  `json:"mode"`
	Method          string  `json:"method"`
	Path            string  `json:"path"`
	Stream          bool    `json:"stream"`
}

// Log text helpers (reference §0, §d).

func pyTime(t time.Time, prefix string) string {
	return "[" + t.UTC().Format("2006-01-02 15:04:05.000") + prefix + "]"
}

func glogTime(t time.Time) string { return "I" + t.UTC().Format("0102 15:04:05.000000") }

func objText(rid string, room uint64) string {
	return fmt.Sprintf("GenerateReqInput(rid='%s', return_logprob=False, logprob_start_len=-1, top_logprobs_num=0, stream=True, log_metrics=True, "+
		"return_hidden_states=False, bootstrap_host='%s', bootstrap_port=8998, bootstrap_room=%d, bootstrap_pair_key=None, data_parallel_rank=None)",
		rid, prefillHost, room)
}

func meta(rid, finish string, prompt, completion int, d time.Duration) string {
	return fmt.Sprintf("{'meta_info': {'id': '%s', 'finish_reason': %s, 'prompt_tokens': %d, 'weight_version': 'default', "+
		"'num_retractions': 0, 'completion_tokens': %d, 'cached_tokens': 0, 'e2e_latency': %.6f}}", rid, finish, prompt, completion, d.Seconds())
}

func metaLength(rid string, prompt int, d time.Duration) string {
	return meta(rid, "{'type': 'length', 'length': 0}", prompt, 1, d)
}

func metaStop(rid string, prompt, completion int, d time.Duration) string {
	return meta(rid, "{'type': 'stop', 'matched': 151336}", prompt, completion, d)
}

func metaAbort(rid, msg string, prompt int, d time.Duration) string {
	return meta(rid, fmt.Sprintf("{'type': 'abort', 'message': %s, 'status_code': 400, 'err_type': None}", pyStr(msg)), prompt, 0, d)
}

func pyStr(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

func hexID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func alnum(n int) string {
	const set = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(set))))
		b[i] = set[k.Int64()]
	}
	return string(b)
}

func randRoom() uint64 {
	k, _ := rand.Int(rand.Reader, new(big.Int).SetUint64(1<<63-1))
	return k.Uint64() + 1
}

// tenantOf names the caller by its API key without keeping the key.
func tenantOf(key string) string {
	if key == "" {
		return "anonymous"
	}
	h := sha256.Sum256([]byte(key))
	return "key-" + hex.EncodeToString(h[:4])
}

func versionLess(a, b string) bool {
	pa, pb := parseV(a), parseV(b)
	for i := range pa {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return false
}

func parseV(s string) [3]int {
	var v [3]int
	s = strings.TrimPrefix(s, "v")
	for i, part := range strings.SplitN(s, ".", 3) {
		n := 0
		for _, ch := range part {
			if ch < '0' || ch > '9' {
				break
			}
			n = n*10 + int(ch-'0')
		}
		v[i] = n
	}
	return v
}
