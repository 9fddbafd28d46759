package parse

import (
	"strings"
	"testing"
	"time"
)

// Every fixture line must parse (or be a recognised unknown) and never be
// malformed.
func TestFixturesNeverMalformed(t *testing.T) {
	for _, c := range []struct {
		file        string
		format      Format
		allowUnknow int
	}{
		{"sglang_real.log", FormatSGLang, 0},
		{"sglang_drift.log", FormatSGLang, 0},
		{"glog_real.log", FormatGlog, 0},
		{"glog_drift.log", FormatGlog, 2}, // the listening line; TENT's duplicate bootstrap (INFO, noise to the classifier)
		{"modelgateway_real.log", FormatModelGateway, 1},
		{"modelgateway_drift.log", FormatModelGateway, 0},
		{"prometheus_real.om", FormatPrometheus, 0},
		{"prometheus_drift.prom", FormatPrometheus, 0},
		{"gateway.jsonl", FormatGateway, 0},
		{"pages.jsonl", FormatPageEvents, 0},
		{"request_metrics.jsonl", FormatRequestMetrics, 0},
	} {
		t.Run(c.file, func(t *testing.T) {
			p := mustNew(t, c.format, ParseOptions{Year: 2025, DefaultTime: utc("2026-08-20T00:00:00Z")})
			unknowns := 0
			for i, l := range fixtureLines(t, c.file) {
				out := p.Parse(Record{Raw: []byte(l)})
				switch out.Status {
				case StatusMalformed:
					t.Errorf("line %d malformed (%s): %s", i+1, out.Reason, l)
				case StatusUnknown:
					unknowns++
				}
			}
			if unknowns != c.allowUnknow {
				t.Errorf("%d unknown lines, want %d", unknowns, c.allowUnknow)
			}
			if got := Detect(joinLines(fixtureLines(t, c.file))); got != c.format && !(c.format == FormatSGLang && got == FormatSGLangJSON) {
				t.Errorf("Detect = %s, want %s", got, c.format)
			}
		})
	}
}

func joinLines(ls []string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }

func TestSGLangPrefix(t *testing.T) {
	ist := time.FixedZone("IST", 5*3600+1800)
	for _, c := range []struct {
		line  string
		opts  ParseOptions
		ts    string
		ranks Ranks
	}{
		{"[2025-11-05 16:35:02] The server is fired up and ready to roll!", ParseOptions{}, "2025-11-05T16:35:02Z", NoRanks},
		{"[2025-11-05 16:35:02.123 TP3] The server is fired up and ready to roll!", ParseOptions{}, "2025-11-05T16:35:02.123Z", Ranks{-1, -1, 3, -1, -1, -1, -1}},
		// v0.5.9+ order and a made-up shuffled order parse the same (set semantics).
		{"[2026-02-23 10:00:00 DP2 PP1 ATTN_CP1 MOE_DP0 TP2 EP2 CP4] The server is fired up and ready to roll!", ParseOptions{}, "2026-02-23T10:00:00Z", Ranks{2, 1, 2, 2, 1, 0, 4}},
		{"[2026-02-23 10:00:00 EP2 TP2 MOE_DP0 ATTN_CP1 PP1 DP2 CP4] The server is fired up and ready to roll!", ParseOptions{}, "2026-02-23T10:00:00Z", Ranks{2, 1, 2, 2, 1, 0, 4}},
		// Location then clock offset.
		{"[2026-02-23 10:00:00] The server is fired up and ready to roll!", ParseOptions{Location: ist, ClockOffset: 2 * time.Second}, "2026-02-23T04:30:02Z", NoRanks},
		{"[2026-04-15 17:13:10][http_server.py:1][INFO]: The server is fired up and ready to roll!", ParseOptions{}, "2026-04-15T17:13:10Z", NoRanks},
	} {
		out := parseOne(t, FormatSGLang, c.opts, c.line)
		eq(t, c.line+" status", out.Status, StatusParsed)
		eq(t, c.line+" ts", out.TS, utc(c.ts))
		if out.Boot != nil {
			eq(t, c.line+" ranks", out.Boot.Ranks, c.ranks)
		}
	}
}

func TestSGLangBatch(t *testing.T) {
	for _, c := range []struct {
		name, file, substr string
		check              func(t *testing.T, b *BatchStat)
	}{
		{"main prefill", "sglang_real.log", "Prefill batch, #new-seq: 1, #new-token: 8192", func(t *testing.T, b *BatchStat) {
			eq(t, "kind", b.Kind, "prefill")
			eq(t, "ranks", b.Ranks, Ranks{3, -1, 3, 3, -1, -1, -1})
			eq(t, "new_token", b.NewToken, uint64(8192))
			eq(t, "usage", b.TokenUsage, 0.41)
			eq(t, "running", b.RunningReq, int32(1))
			eq(t, "queue", b.QueueReq, int32(2))
			eq(t, "bootstrap", b.BootstrapReq, int32(0))
			eq(t, "inflight", b.InflightReq, int32(1))
			eq(t, "throughput", b.Throughput, 15734.14)
			eq(t, "nkeys", len(b.FieldKeys), 12)
			eq(t, "key 10", b.FieldKeys[10], "cuda graph")
			eq(t, "val 10", b.FieldValues[10], "False")
		}},
		{"main decode", "sglang_real.log", "Decode batch, #running-req: 24", func(t *testing.T, b *BatchStat) {
			eq(t, "kind", b.Kind, "decode")
			eq(t, "token", b.NumToken, uint64(233600))
			eq(t, "prealloc", b.PreallocReq, int32(2))
			eq(t, "transfer", b.TransferReq, int32(5))
			eq(t, "retracted", b.RetractedReq, int32(0))
			eq(t, "bootstrap absent", b.BootstrapReq, int32(-1))
			eq(t, "throughput", b.Throughput, 239.06)
		}},
		{"v0.4.5 dot", "sglang_drift.log", "[2025-04-27 10:00:00 TP0] Prefill batch.", func(t *testing.T, b *BatchStat) {
			eq(t, "new_token", b.NewToken, uint64(512))
			eq(t, "ranks", b.Ranks.TP, int16(0))
			eq(t, "inflight absent", b.InflightReq, int32(-1))
		}},
		{"v0.4.6 unbootstrapped trailing space", "sglang_drift.log", "#unbootstrapped-req: 3", func(t *testing.T, b *BatchStat) {
			eq(t, "bootstrap", b.BootstrapReq, int32(3))
			eq(t, "inflight", b.InflightReq, int32(2))
			eq(t, "last key", b.FieldKeys[len(b.FieldKeys)-1], "#transferring-req")
		}},
		{"v0.5.3 prefill prealloc is bootstrap", "sglang_drift.log", "#prealloc-req: 4, #inflight-req: 5", func(t *testing.T, b *BatchStat) {
			eq(t, "bootstrap", b.BootstrapReq, int32(4))
			eq(t, "prealloc", b.PreallocReq, int32(-1))
			eq(t, "inflight", b.InflightReq, int32(5))
		}},
		{"v0.5.3 decode", "sglang_drift.log", "#prealloc-req: 1, #transfer-req: 2, #retracted-req: 3", func(t *testing.T, b *BatchStat) {
			eq(t, "prealloc", b.PreallocReq, int32(1))
			eq(t, "transfer", b.TransferReq, int32(2))
			eq(t, "retracted", b.RetractedReq, int32(3))
		}},
		{"v0.5.4 iteration", "sglang_drift.log", "Prefill batch [17]", func(t *testing.T, b *BatchStat) { eq(t, "iter", b.Iter, int64(17)) }},
		{"v0.5.4 decode iteration", "sglang_drift.log", "Decode batch [40]", func(t *testing.T, b *BatchStat) { eq(t, "iter", b.Iter, int64(40)) }},
		{"v0.5.9 ranks", "sglang_drift.log", "ATTN_CP1", func(t *testing.T, b *BatchStat) {
			eq(t, "ranks", b.Ranks, Ranks{2, 1, 2, 2, 1, 0, -1})
		}},
		{"v0.5.12 bootstrap-req swa", "sglang_drift.log", "#bootstrap-req: 6", func(t *testing.T, b *BatchStat) {
			eq(t, "bootstrap", b.BootstrapReq, int32(6))
			eq(t, "full usage", b.TokenUsage, 0.05)
		}},
		{"swa decode", "sglang_drift.log", "#full token: 500", func(t *testing.T, b *BatchStat) {
			eq(t, "token", b.NumToken, uint64(500))
			eq(t, "usage", b.TokenUsage, 0.30)
		}},
		{"user logging config", "sglang_real.log", "scheduler_metrics_mixin.py:424", func(t *testing.T, b *BatchStat) {
			eq(t, "kind", b.Kind, "prefill")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := parseOne(t, FormatSGLang, ParseOptions{}, fixtureLine(t, c.file, c.substr))
			eq(t, "status", out.Status, StatusParsed)
			eq(t, "kind", out.Kind, KindBatch)
			if out.Batch == nil {
				t.Fatal("no batch payload")
			}
			c.check(t, out.Batch)
		})
	}
}

func TestSGLangBoot(t *testing.T) {
	for _, c := range []struct {
		name, file, substr string
		check              func(t *testing.T, f *BootFacts)
	}{
		{"kv real", "sglang_real.log", "#tokens: 105600", func(t *testing.T, f *BootFacts) {
			eq(t, "fact", f.Fact, "kv_allocated")
			eq(t, "tokens", f.KVPoolTokens, uint64(105600))
			eq(t, "name", f.KVCacheName, "KV Cache")
			eq(t, "size", f.KVSizeGB, 14.52)
		}},
		{"kv dynamo", "sglang_real.log", "#tokens: 360072", func(t *testing.T, f *BootFacts) {
			eq(t, "tokens", f.KVPoolTokens, uint64(360072))
			eq(t, "name", f.KVCacheName, "KV Cache")
			eq(t, "size", f.KVSizeGB, 23.57)
		}},
		{"kv dtype", "sglang_drift.log", "torch.float8_e4m3fn", func(t *testing.T, f *BootFacts) {
			eq(t, "dtype", f.KVDtype, "torch.float8_e4m3fn")
			eq(t, "tokens", f.KVPoolTokens, uint64(360072))
		}},
		{"kv swa", "sglang_drift.log", "SWA KV Cache", func(t *testing.T, f *BootFacts) {
			eq(t, "name", f.KVCacheName, "SWA KV Cache")
			eq(t, "tokens", f.KVPoolTokens, uint64(50000))
		}},
		{"mamba", "sglang_drift.log", "Mamba Cache", func(t *testing.T, f *BootFacts) {
			eq(t, "name", f.KVCacheName, "Mamba Cache")
			eq(t, "tokens", f.KVPoolTokens, uint64(0))
		}},
		{"post-capture", "sglang_drift.log", "Post-capture", func(t *testing.T, f *BootFacts) {
			eq(t, "name", f.KVCacheName, "KV Cache")
			eq(t, "tokens", f.KVPoolTokens, uint64(123456))
			eq(t, "avail", f.AvailMemGB, 3.21)
		}},
		{"limits real", "sglang_real.log", "max_total_num_tokens=105600", func(t *testing.T, f *BootFacts) {
			eq(t, "max total", f.MaxTotalNumTokens, uint64(105600))
			eq(t, "chunked", f.ChunkedPrefillSize, int64(4096))
			eq(t, "prefill", f.MaxPrefillTokens, uint64(16384))
			eq(t, "running", f.MaxRunningRequests, uint64(2048))
			eq(t, "ctx", f.ContextLen, uint64(40960))
			eq(t, "avail", f.AvailMemGB, 21.09)
			eq(t, "max_req_input_len", f.MaxReqInputLen, uint64(40954))
		}},
		{"limits v0.4.6 #30233", "sglang_drift.log", "max_total_num_tokens=284928", func(t *testing.T, f *BootFacts) {
			eq(t, "max_req_input_len", f.MaxReqInputLen, uint64(284922))
		}},
		{"limits glued real", "sglang_real.log", "avail mem=6.95 GB max_total", func(t *testing.T, f *BootFacts) {
			eq(t, "max total", f.MaxTotalNumTokens, uint64(2980168))
		}},
		{"limits glued full", "sglang_drift.log", "avail mem=6.95 GB max_total", func(t *testing.T, f *BootFacts) {
			eq(t, "ctx", f.ContextLen, uint64(131072))
			eq(t, "avail", f.AvailMemGB, 6.90)
			eq(t, "max_req_input_len", f.MaxReqInputLen, uint64(131066))
		}},
		{"server args", "sglang_real.log", "server_args=", func(t *testing.T, f *BootFacts) {
			eq(t, "model", f.ModelPath, "zai-org/GLM-5.2-FP8")
			eq(t, "tp", f.TPSize, uint16(32))
			eq(t, "mem", f.MemFractionStatic, 0.75)
			eq(t, "page", f.PageSize, uint32(64))
			eq(t, "mode", f.DisaggregationMode, "prefill")
			eq(t, "backend", f.TransferBackend, "mooncake")
			eq(t, "keys", f.ArgKeys, []string{"model_path", "tp_size", "mem_fraction_static", "page_size", "disaggregation_mode", "disaggregation_transfer_backend"})
		}},
		{"memory pool end", "sglang_real.log", "Memory pool end. avail mem=21.66", func(t *testing.T, f *BootFacts) {
			eq(t, "avail", f.AvailMemGB, 21.66)
		}},
		{"ready", "sglang_real.log", "fired up", func(t *testing.T, f *BootFacts) { eq(t, "fact", f.Fact, "ready") }},
		{"load weight", "sglang_drift.log", "Load weight end", func(t *testing.T, f *BootFacts) { eq(t, "avail", f.AvailMemGB, 28.91) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := parseOne(t, FormatSGLang, ParseOptions{}, fixtureLine(t, c.file, c.substr))
			eq(t, "status", out.Status, StatusParsed)
			if out.Boot == nil {
				t.Fatalf("no boot payload: %+v", out)
			}
			c.check(t, out.Boot)
		})
	}
}

func TestServerArgsFull(t *testing.T) {
	line := `[2026-07-06 10:00:01] server_args=ServerArgs(model_path='/models/a,b(c)', tokenizer_path='x\'y', tp_size=8, dp_size=4, pp_size=1, ep_size=8, mem_fraction_static=0.82, max_total_tokens=None, chunked_prefill_size=-1, max_running_requests=None, page_size=1, context_length=None, allow_auto_truncate=True, json_model_override_args='{"a": [1, 2]}', lora_paths={'a': 'b'}, cuda_graph_bs=[1, 2, 4], speculative=(1, 'x'), log_requests_level=2, disaggregation_mode='decode', disaggregation_transfer_backend='mooncake', disaggregation_ib_device=None, load_balance_method=<LoadBalanceMethod.ROUND_ROBIN: 'round_robin'>, enable_metrics=False)`
	out := parseOne(t, FormatSGLang, ParseOptions{}, line)
	f := out.Boot
	if f == nil {
		t.Fatalf("no boot: %+v", out)
	}
	eq(t, "model", f.ModelPath, "/models/a,b(c)")
	eq(t, "dp", f.DPSize, uint16(4))
	eq(t, "ep", f.EPSize, uint16(8))
	eq(t, "chunked", f.ChunkedPrefillSize, int64(-1))
	eq(t, "auto truncate", f.AllowAutoTruncate, true)
	eq(t, "mode", f.DisaggregationMode, "decode")
	eq(t, "n keys", len(f.ArgKeys), 23)
	vals := map[string]string{}
	for i, k := range f.ArgKeys {
		vals[k] = f.ArgValues[i]
	}
	eq(t, "tokenizer", vals["tokenizer_path"], "x'y")
	eq(t, "json override", vals["json_model_override_args"], `{"a": [1, 2]}`)
	eq(t, "cuda_graph_bs", vals["cuda_graph_bs"], "[1, 2, 4]")
	eq(t, "lbm", vals["load_balance_method"], "<LoadBalanceMethod.ROUND_ROBIN: 'round_robin'>")
	eq(t, "enable_metrics", vals["enable_metrics"], "False")
}

func TestSGLangEngineEvents(t *testing.T) {
	for _, c := range []struct {
		name, file, substr string
		want               EngineEvent
	}{
		{"rejected #30233", "sglang_real.log", "Input length (284937", EngineEvent{Event: "rejected", RID: "9f3c…", InputLen: 284937, LimitTokens: 284922, StatusCode: 400}},
		{"truncated", "sglang_drift.log", "Truncated.", EngineEvent{Event: "truncated", InputLen: 300000, LimitTokens: 284922, StatusCode: 400}},
		{"tokenizer", "sglang_drift.log", "The input (170000", EngineEvent{Event: "context_exceeded", InputLen: 170000, LimitTokens: 163840, StatusCode: 400}},
		{"capacity", "sglang_drift.log", "Request dd17", EngineEvent{Event: "capacity_exceeded", RID: "dd17", InputLen: 300000, LimitTokens: 284928, StatusCode: 400}},
		{"swa eviction", "sglang_drift.log", "SWA eviction insufficient", EngineEvent{Event: "capacity_exceeded", RID: "dd17", InputLen: 4096, LimitTokens: 1024, StatusCode: 503}},
		{"expand", "sglang_drift.log", "After expanding", EngineEvent{Event: "expand_exceeded", RID: "dd18", InputLen: 290000, LimitTokens: 284922, StatusCode: 400}},
		{"receive text", "sglang_drift.log", "Receive: obj=", EngineEvent{Event: "received", RID: "ee19", BootstrapHost: "10.0.0.1", BootstrapPort: 8998, BootstrapRoom: 9223372036854775806}},
		{"finish text", "sglang_drift.log", "Finish: obj=", EngineEvent{Event: "finished", RID: "ee19", BootstrapHost: "10.0.0.1", BootstrapPort: 8998, BootstrapRoom: 9223372036854775806,
			PromptTokens: 1, FinishType: "abort", FinishMessage: "Input length (284937 tokens) exceeds the maximum allowed length (284922 tokens).", StatusCode: 400, E2ELatencyMs: 12.3}},
		{"receive openai dict", "sglang_drift.log", "Receive OpenAI", EngineEvent{Event: "received_openai", RID: "ff20", BootstrapRoom: 7}},
		{"json finished", "sglang_drift.log", `"request.finished"`, EngineEvent{Event: "finished", RID: "gg21", BootstrapHost: "10.0.0.1", BootstrapPort: 8998, BootstrapRoom: 9223372036854775805,
			PromptTokens: 300, CompletionTokens: 1, FinishType: "length", E2ELatencyMs: 1500}},
		{"json received", "sglang_drift.log", `"request.received"`, EngineEvent{Event: "received", RID: "gg22", BootstrapRoom: 11}},
		{"uvicorn", "sglang_real.log", "INFO:     10.10.11.1", EngineEvent{Event: "http_access", Client: "10.10.11.1:41698", Method: "POST", Path: "/v1/chat/completions", StatusCode: 200}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := parseOne(t, FormatSGLang, ParseOptions{}, fixtureLine(t, c.file, c.substr))
			eq(t, "status", out.Status, StatusParsed)
			if out.Engine == nil {
				t.Fatalf("no engine payload: %+v", out)
			}
			got := *out.Engine
			got.Ranks = Ranks{}
			got.E2ELatencyMs = float64(int64(got.E2ELatencyMs*10+0.5)) / 10
			eq(t, "event", got, c.want)
			eq(t, "join rid", out.RID, c.want.RID)
		})
	}
}

func TestSGLangTransfer(t *testing.T) {
	for _, c := range []struct {
		name, file, substr string
		want               TransferEvent
	}{
		{"decode transfer real", "sglang_real.log", "Decode transfer failed", TransferEvent{Event: "decode_transfer_failed", RID: "78fde411d57a4d7791b63963eac74968",
			BootstrapRoom: 4793981895866140836, Reason: "Aborted by AbortReq.", MetadataIndex: -1}},
		{"bootstrap timeout", "sglang_drift.log", "Prefill bootstrap failed for request rank=0", TransferEvent{Event: "bootstrap_failed", RID: "aa11", BootstrapRoom: 42,
			Reason: "Request 42 timed out after 300.0s in KVPoll.Bootstrapping", MetadataIndex: -1}},
		{"prefill transfer", "sglang_drift.log", "Prefill transfer failed", TransferEvent{Event: "prefill_transfer_failed", RID: "aa12", BootstrapRoom: 43,
			Reason: "Failed to send kv chunk of 43 to 10.0.0.2:17001", Peer: "10.0.0.2:17001", MetadataIndex: -1}},
		{"handshake", "sglang_drift.log", "Decode handshake failed", TransferEvent{Event: "decode_handshake_failed", RID: "bb13", BootstrapRoom: 44,
			Reason: "Lost connection with prefill instance (bootstrap_addr: 10.0.0.1:8998)", Peer: "10.0.0.1:8998", MetadataIndex: -1}},
		{"session dead", "sglang_drift.log", "remote mooncake session", TransferEvent{Event: "decode_transfer_failed", RID: "bb14", BootstrapRoom: 45,
			Reason: "Decode instance could be dead, remote mooncake session 10.0.0.3:15004 is not alive", Peer: "10.0.0.3:15004", MetadataIndex: -1}},
		{"corruption", "sglang_drift.log", "Context corruption", TransferEvent{Event: "context_corruption", RID: "cc15", BootstrapRoom: 9223372036854775807, OtherRoom: 1234, MetadataIndex: 17,
			Reason: "Context corruption detected: Request cc15 (bootstrap_room=9223372036854775807) received metadata from bootstrap_room=1234. Metadata buffer index: 17. This indicates metadata buffer index collision."}},
		{"not ready", "sglang_drift.log", "readiness gate", TransferEvent{Event: "metadata_not_ready", RID: "cc16", BootstrapRoom: 46, MetadataIndex: 3,
			Reason: "Metadata unexpectedly not ready after readiness gate: request cc16, bootstrap_room=46, metadata_buffer_index=3"}},
		{"lost", "sglang_drift.log", "] Lost connection", TransferEvent{Event: "lost_connection", Peer: "10.0.0.1:8998", MetadataIndex: -1,
			Reason: "Lost connection with prefill instance (bootstrap_addr: 10.0.0.1:8998), 3 requests affected"}},
		{"losing", "sglang_drift.log", "Losing connection", TransferEvent{Event: "lost_connection", Peer: "10.0.0.1:8998", MetadataIndex: -1,
			Reason: "Losing connection with prefill instance (bootstrap_addr: 10.0.0.1:8998), affected 3 requests"}},
		{"session", "sglang_drift.log", "Session 10.0.0.3", TransferEvent{Event: "session_failed", Peer: "10.0.0.3:15004", Reason: "Session 10.0.0.3:15004 failed.", MetadataIndex: -1}},
		{"prefill down", "sglang_drift.log", "is healthy before", TransferEvent{Event: "prefill_down", Peer: "10.0.0.1:8998", BootstrapRoom: 47, MetadataIndex: -1,
			Reason: "Prefill server with bootstrap_addr: 10.0.0.1:8998 is healthy before, but now it is down. Request (bootstrap_room: 47) has been marked as failed."}},
		{"indices", "sglang_drift.log", "chunked_dst_kv_indice", TransferEvent{Event: "kv_indices_mismatch", MetadataIndex: -1,
			Reason: "len(chunked_dst_kv_indice) = 10, len(kv_chunk.prefill_kv_indices) = 12"}},
		{"nixl transport", "sglang_drift.log", "NIXL transport error for room", TransferEvent{Event: "prefill_transfer_failed", BootstrapRoom: 48,
			Reason: "NIXL_ERR_REMOTE_DISCONNECT", MetadataIndex: -1}},
		{"nixl worker", "sglang_drift.log", "Unexpected transfer worker error", TransferEvent{Event: "prefill_transfer_failed", BootstrapRoom: 49,
			Reason: "unexpected transfer worker error", MetadataIndex: -1}},
		{"deferred timeout", "sglang_drift.log", "Deferred KV release for room 50", TransferEvent{Event: "deferred_release_timeout", BootstrapRoom: 50,
			Reason: "Deferred KV release for room 50 timed out after 30.0s without a full drain ack from prefill; releasing anyway.", MetadataIndex: -1}},
		{"deferred error", "sglang_drift.log", "Deferred KV release failed", TransferEvent{Event: "deferred_release_error", BootstrapRoom: 51,
			Reason: "Deferred KV release failed for room 51", MetadataIndex: -1}},
		{"warmup v0.5.16", "sglang_drift.log", "Disaggregation warmup failed", TransferEvent{Event: "warmup_failed",
			Reason: "Disaggregation warmup failed (mode=prefill), status codes: [503]", MetadataIndex: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := parseOne(t, FormatSGLang, ParseOptions{}, fixtureLine(t, c.file, c.substr))
			eq(t, "status", out.Status, StatusParsed)
			if out.Transfer == nil {
				t.Fatalf("no transfer payload: %+v", out)
			}
			got := *out.Transfer
			got.Ranks, got.Source = Ranks{}, ""
			eq(t, "event", got, c.want)
			eq(t, "join room", out.BootstrapRoom, c.want.BootstrapRoom)
		})
	}
	for _, sub := range []string{"Some requests timed out", "Some requests fail to receive"} {
		out := parseOne(t, FormatSGLang, ParseOptions{}, fixtureLine(t, "sglang_drift.log", sub))
		eq(t, sub+" kind", out.Kind, KindTransfer)
	}
}

func TestSGLangGlued(t *testing.T) {
	out := parseOne(t, FormatSGLang, ParseOptions{}, fixtureLine(t, "sglang_drift.log", "15734.14[2026"))
	eq(t, "primary", out.Kind, KindBatch)
	eq(t, "last key", out.Batch.FieldKeys[len(out.Batch.FieldKeys)-1], "input throughput (token/s)")
	if len(out.More) != 1 || out.More[0].Transfer == nil {
		t.Fatalf("glued transfer line not found: %+v", out.More)
	}
	eq(t, "glued rid", out.More[0].Transfer.RID, "hh23")
	eq(t, "glued ts", out.More[0].TS, utc("2026-08-20T10:11:12Z"))
}

func TestSGLangMalformedAndUnknown(t *testing.T) {
	for _, c := range []struct {
		line   string
		status Status
	}{
		{"[2026-01-01 00:00:00] something else entirely", StatusUnknown},
		{"", StatusUnknown},
		{"[2026-01-01 00:00:00 TP0] Prefill batch [x], #new-seq: 1", StatusMalformed},
		{"[2026-01-01 00:00:00 TP0] Decode batch, #running-req: lots", StatusMalformed},
		{"[2026-01-01 00:00:00 TP0] Input length (many tokens) exceeds the maximum allowed length (1 tokens).", StatusMalformed},
		{`[2026-01-01 00:00:00] {"event": "request.finished", "rid": `, StatusMalformed},
		{"[2026-01-01 00:00:00] Decode transfer failed for request rank=0 with exception boom", StatusMalformed},
	} {
		out := parseOne(t, FormatSGLang, ParseOptions{}, c.line)
		eq(t, c.line, out.Status, c.status)
		if c.status == StatusMalformed && out.Reason == "" {
			t.Errorf("%s: malformed without reason", c.line)
		}
	}
}
