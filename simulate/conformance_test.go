package simulate

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The conformance checker: every line the simulator writes must be one of
// the formats documented in the SGLang/Mooncake reference, and the
// reference's own example lines must pass the same checker.

var sglPrefix = regexp.MustCompile(`^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] (.*)$`)

var sglKinds = []struct {
	kind string
	re   *regexp.Regexp
}{
	{"server_args", regexp.MustCompile(`^server_args=ServerArgs\(.*\)$`)},
	{"init_dist", regexp.MustCompile(`^Init torch distributed ends\. (?:elapsed=\d+\.\d{2} s, )?mem usage=\d+\.\d{2} GB$`)},
	{"load_begin", regexp.MustCompile(`^Load weight begin\. avail mem=\d+\.\d{2} GB$`)},
	{"load_end", regexp.MustCompile(`^Load weight end\. (?:elapsed=[\d.]+ s, )?type=\w+, (?:dtype=[\w.]+, |quant=\w+, )?avail mem=[\d.]+ GB, mem usage=[\d.]+ GB\.$`)},
	{"kv_alloc", regexp.MustCompile(`^KV Cache is allocated\. (?:dtype: [\w.]+, )?#tokens: \d+, (?:K size: [\d.]+ GB, V size: [\d.]+ GB|KV size: [\d.]+ GB)$`)},
	{"mem_pool_end", regexp.MustCompile(`^Memory pool end\. avail mem=[\d.]+ GB$`)},
	{"limits", regexp.MustCompile(`max_total_num_tokens=\d+, chunked_prefill_size=-?\d+, max_prefill_tokens=\d+, max_running_requests=\d+, context_len=\d+(?:, available_gpu_mem=[\d.]+ GB)?$`)},
	{"cuda_graph", regexp.MustCompile(`^Capture cuda graph begin\. This can take up to several minutes\. avail mem=[\d.]+ GB$`)},
	{"ready", regexp.MustCompile(`^The server is fired up and ready to roll!$`)},
	{"prefill_batch", regexp.MustCompile(`^Prefill batch(?: \[\d+\])?[.,] #new-seq: \d+, #new-token: \d+, #cached-token: \d+, (?:[#a-z][a-z\- ()/]*: [\w.]+(?:, |$))+$`)},
	{"decode_batch", regexp.MustCompile(`^Decode batch(?: \[\d+\])?[.,] #running-req: \d+, (?:[#a-z][a-z\- ()/]*: [\w.]+(?:, |$))+$`)},
	{"reject", regexp.MustCompile(`^Input length \(\d+ tokens\) exceeds the maximum allowed length \(\d+ tokens\)\. Use a shorter input or enable --allow-auto-truncate\., self\.rid='[^']*'$`)},
	{"transfer_failed", regexp.MustCompile(`^(?:Decode|Prefill) transfer failed for request rank=\d+ (?:decode_req\.)?req\.rid='[^']*' (?:decode_req\.)?req\.bootstrap_room=\d+ with exception KVTransferError\(bootstrap_room=\d+\): (?:Aborted by AbortReq\.|Request \d+ timed out after [\d.]+s in KVPoll\.\w+|(?:Lost|Losing) connection with prefill instance \(bootstrap_addr: [\d.:]+\)|Failed to send kv chunk of \d+ to [\d.:]+|Decode instance could be dead, remote mooncake session [\d.:]+ is not alive)$`)},
	{"corruption", regexp.MustCompile(`^Context corruption detected: Request \S+ \(bootstrap_room=\d+\) received metadata from bootstrap_room=\d+\. Metadata buffer index: \d+\. This indicates metadata buffer index collision\.$`)},
	{"timeout_hint", regexp.MustCompile(`^Some requests fail to receive KV Cache transfer done signal after bootstrapping\. If a greater mean TTFT is acceptable, you can 'export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=600' \(10 minutes\) to relax the timeout condition\. $`)},
	{"access", regexp.MustCompile(`^INFO:     [\d.]+:\d+ - "POST /\S+ HTTP/1\.1" \d{3} [A-Za-z ]+$`)},
	{"receive", regexp.MustCompile(`^Receive: obj=GenerateReqInput\(.*\)$`)},
	{"finish", regexp.MustCompile(`^Finish: obj=GenerateReqInput\(.*\), out=\{.*'meta_info': \{'id': '[0-9a-f]{32}', 'finish_reason': \{'type': '(?:length|stop|abort)'.*\}\}$`)},
	{"request_json", regexp.MustCompile(`^\{"timestamp": "\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{6})?", "event": "request\.(?:received|finished)", "rid": "[0-9a-f]{32}", .*\}$`)},
	{"traceback_head", regexp.MustCompile(`^Scheduler hit an exception: Traceback \(most recent call last\):$`)},
	{"sigquit", regexp.MustCompile(`^Received sigquit from a child process\. It usually means the child failed\.$`)},
	{"startup_noise", regexp.MustCompile(`^(?:Using default HuggingFace chat template with detected content format: \w+|Init torch distributed begin\.|Using model weights format \['\*\.safetensors'\]|Using KV cache dtype: [\w.]+|Capture cuda graph end\. Time elapsed: [\d.]+ s\. mem usage=[\d.]+ GB\. avail mem=[\d.]+ GB\.|INFO:     (?:Started server process \[\d+\]|Waiting for application startup\.|Application startup complete\.|Uvicorn running on http://[\d.:]+ \(Press CTRL\+C to quit\)))$`)},
}

// unprefixedNoise: what torch, tqdm and glog print into the same stream
// without SGLang's prefix (the forms seen in public reports).
var unprefixedNoise = []*regexp.Regexp{
	regexp.MustCompile(`^\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. Expected number of connected peer ranks is : \d+$`),
	regexp.MustCompile(`^Loading safetensors checkpoint shards: +\d+% Completed \| \d+/\d+ \[\d\d:\d\d<\d\d:\d\d, +[\d.]+it/s\]$`),
	regexp.MustCompile(`^Capturing batches \(bs=\d+ avail_mem=[\d.]+ GB\): +\d+%\|[█ ]+\| \d+/\d+ \[\d\d:\d\d<\d\d:\d\d, +[\d.]+it/s\]$`),
	regexp.MustCompile(`^WARNING: Logging before InitGoogleLogging\(\) is written to STDERR$`),
}

var unprefixed = []*regexp.Regexp{ // Python traceback body
	regexp.MustCompile(`^  File "[^"]+", line \d+, in \w+$`),
	regexp.MustCompile(`^    \S.*$`),
	regexp.MustCompile(`^\w+Error: .+$`),
	regexp.MustCompile(`^CUDA kernel errors might be asynchronously reported .*$`),
	regexp.MustCompile(`^$`),
}

var glogRe = regexp.MustCompile(`^[IWEF](?:\d{8}|\d{4}) \d{2}:\d{2}:\d{2}\.\d{6} \d+ [\w.]+:\d+\] (?:Worker: Process failed for slice \(opcode: \d+, source_addr: 0x[0-9a-f]+, length: \d+, dest_addr: 0x[0-9a-f]+, local_nic: \w+, peer_nic: [\d.]+:\d+@\w+, dest_rkey: \d+, retry_cnt: \d+(?:, max_retry_cnt: \d+)?\): [a-z ]+|Transfer Engine parseHostNameWithPort\. server_name: \S+ port: \d+|Metrics reporting is disabled \(set MC_TE_METRIC=1 to enable\)|Find best gid index: \d+ on mlx5_\d+/|RDMA device: mlx5_\d+, LID: \d+, GID: \(GID_Index \d+\) [0-9a-f:]+|Transfer Engine RPC using P2P handshake, listening on [\d.:]+|Auto-discovering topology\.\.\.|Topology discovery complete\. Found \d+ HCAs\.)$`)

func classifySGLang(line string) string {
	m := sglPrefix.FindStringSubmatch(line)
	if m == nil {
		if slices.Contains(garbageLines, line) {
			return "garbage"
		}
		for _, re := range unprefixed {
			if re.MatchString(line) {
				return "traceback_body"
			}
		}
		for _, re := range unprefixedNoise {
			if re.MatchString(line) {
				return "stream_noise"
			}
		}
		return ""
	}
	for _, k := range sglKinds {
		if k.re.MatchString(m[2]) {
			if k.kind == "request_json" && !json.Valid([]byte(m[2])) {
				return ""
			}
			return k.kind
		}
	}
	return ""
}

func TestConformanceReferenceLines(t *testing.T) {
	f, err := os.Open("testdata/reference_lines.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") || sc.Text() == "" {
			continue
		}
		kind, line, _ := strings.Cut(sc.Text(), "\t")
		got := classifySGLang(line)
		if kind == "glog" && glogRe.MatchString(line) {
			got = "glog"
		}
		if got != kind {
			t.Errorf("reference line classified %q, want %q: %s", got, kind, line)
		}
		n++
	}
	if n < 10 {
		t.Fatalf("only %d reference lines", n)
	}
}

func TestConformanceOutput(t *testing.T) {
	dir := runScenario(t, "mixed", 7, 0.03, true)
	kinds := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	pe, _ := filepath.Glob(filepath.Join(dir, "page-events", "*"))
	prom, _ := filepath.Glob(filepath.Join(dir, "metrics", "*", "*.prom"))
	for _, p := range append(files, pe...) {
		name := filepath.Base(p)
		var check func(string) string
		switch {
		case strings.HasSuffix(name, ".mooncake.log"):
			check = func(l string) string {
				if glogRe.MatchString(l) {
					return "glog"
				}
				if l == "WARNING: Logging before InitGoogleLogging() is written to STDERR" {
					return "stream_noise"
				}
				return ""
			}
		case strings.HasSuffix(name, ".log"):
			// One process stream: Mooncake's glog lines among SGLang's.
			check = func(l string) string {
				if glogRe.MatchString(l) {
					return "glog"
				}
				return classifySGLang(l)
			}
		case strings.HasPrefix(name, "gateway-"):
			check = checkGatewayLine
		case strings.HasSuffix(filepath.Dir(p), "page-events"):
			check = checkPageEventLine
		default:
			continue
		}
		forLines(t, p, func(i int, line string) {
			k := check(line)
			if k == "" {
				t.Errorf("%s:%d: line matches no reference format: %.300q", name, i, line)
				return
			}
			kinds[k]++
		})
	}
	for _, p := range prom {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", p, err)
		}
		if _, ok := fams["sglang:max_total_num_tokens"]; !ok {
			t.Errorf("%s: no max_total_num_tokens", p)
		}
		kinds["prometheus"]++
	}
	for _, want := range []string{"server_args", "kv_alloc", "limits", "prefill_batch", "decode_batch", "reject",
		"transfer_failed", "access", "receive", "finish", "request_json", "traceback_head", "traceback_body",
		"garbage", "glog", "gateway", "page_event", "prometheus", "corruption", "startup_noise", "stream_noise"} {
		if kinds[want] == 0 {
			t.Errorf("output has no %s lines", want)
		}
	}
	t.Logf("line kinds: %v", kinds)
}

func checkGatewayLine(line string) string {
	var g struct {
		TS         string   `json:"ts"`
		RequestID  string   `json:"request_id"`
		Tenant     string   `json:"tenant"`
		Status     int      `json:"status"`
		Prompt     *int     `json:"prompt_tokens"`
		TTFT       *float64 `json:"ttft_ms"`
		Dur        *float64 `json:"duration_ms"`
		Room       uint64   `json:"bootstrap_room"`
		Gateway    string   `json:"gateway"`
		PrefillEP  *string  `json:"prefill_endpoint"`
		DecodeEP   *string  `json:"decode_endpoint"`
		PrefillRID *string  `json:"prefill_rid"`
	}
	if json.Unmarshal([]byte(line), &g) != nil || g.RequestID == "" || g.Tenant == "" || g.Status == 0 ||
		g.Prompt == nil || g.TTFT == nil || g.Dur == nil || g.Gateway == "" || g.PrefillEP == nil || g.DecodeEP == nil || g.PrefillRID == nil || g.Room >= 1<<63 {
		return ""
	}
	if !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z$`).MatchString(g.TS) {
		return ""
	}
	return "gateway"
}

func checkPageEventLine(line string) string {
	var e struct {
		TS    string  `json:"ts"`
		Node  string  `json:"node"`
		Event string  `json:"event"`
		Rank  *int    `json:"dp_rank"`
		Room  uint64  `json:"bootstrap_room"`
		Pages []int64 `json:"pages"`
	}
	if json.Unmarshal([]byte(line), &e) != nil || e.Node == "" || e.Rank == nil || len(e.Pages) == 0 ||
		!slices.Contains([]string{"alloc", "free", "write", "read"}, e.Event) {
		return ""
	}
	return "page_event"
}

func forLines(t *testing.T, path string, fn func(int, string)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for i := 1; sc.Scan(); i++ {
		fn(i, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
