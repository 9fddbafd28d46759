package parse

import "testing"

// Each family of the registry, under a hint that is not its own: the line
// is read by its shape; the hint only breaks ties.
func TestClassifierFamilies(t *testing.T) {
	for _, c := range []struct {
		hint   Format
		line   string
		family string
		status Status
		event  string
	}{
		{FormatGlog, "[2026-03-25 09:32:19] KV Cache is allocated. #tokens: 105600, K size: 7.26 GB, V size: 7.26 GB", "sglang", StatusParsed, "kv_allocated"},
		{FormatSGLang, "E0917 16:23:13.204995 4058290 worker_pool.cpp:294] Worker: Process failed for slice (opcode: 1, source_addr: 0x1, length: 1, dest_addr: 0x2, local_nic: mlx5_7, peer_nic: 1.2.3.4:15004@mlx5_7, dest_rkey: 1, retry_cnt: 0): local protection error", "mooncake-glog", StatusParsed, "slice_failed"},
		{FormatSGLang, "I0917 16:19:42.193531 3936072 transfer_engine.cpp:185] Auto-discovering topology...", "mooncake-glog", StatusNoise, ""},
		{FormatSGLang, "W0917 16:19:42.193531 3936072 x.cpp:1] something new", "mooncake-glog", StatusUnknown, ""},
		{FormatUnknown, "2025-08-31 07:32:08 ERROR sglang_router_rs::routers::http::pd_router: src/routers/http/pd_router.rs:1319: Stream error from decode server http://10.0.0.3:8001: error decoding response body", "rust-tracing", StatusParsed, "decode_stream_error"},
		{FormatSGLang, "2025-08-01 00:41:58  INFO sglang_router_rs::server: src/server.rs:265: Starting router on 127.0.0.9:8000", "rust-tracing", StatusNoise, ""},
		{FormatGlog, "2025-11-27T03:23:59.116013Z  INFO memory_pool._finalize_allocation_log: KV Cache is allocated. #tokens: 360072, KV size: 23.57 GB", "python-logging", StatusParsed, "kv_allocated"},
		{FormatGlog, "[2026-04-15 17:13:10][scheduler_metrics_mixin.py:424][INFO]: Prefill batch, #new-seq: 1, #new-token: 10, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0", "sglang", StatusParsed, "prefill"},
		{FormatGlog, `INFO:     10.10.11.1:41698 - "POST /v1/chat/completions HTTP/1.1" 200 OK`, "uvicorn", StatusParsed, "http_access"},
		{FormatGlog, "Skip sending kv chunk for request req.rid='abc' req.bootstrap_room=42 because page_indices is empty", "", StatusParsed, "kv_chunk_skipped"},
		{FormatSGLang, "[2025-09-17 16:23:13 TP0] Attempting to reconnect to 10.0.0.1:8998...", "sglang", StatusParsed, "reconnect_attempt"},
		{FormatSGLang, "[2025-09-17 16:23:13 TP0] Session 10.0.0.2:15004 failed.", "sglang", StatusParsed, "session_failed"},
		{FormatSGLang, "[2026-04-15 08:41:05] Prefill disaggregation mode warm Up Failed, status code: 400", "sglang", StatusParsed, "warmup_failed"},
		{FormatSGLang, "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.96s/it]", "progress-bar", StatusNoise, ""},
		{FormatSGLang, "[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1", "gloo", StatusNoise, ""},
		{FormatSGLang, "node1:123:456 [0] NCCL INFO Channel 00/02 : 0 1", "nccl", StatusNoise, ""},
		{FormatSGLang, "NIXL INFO    _api.py:361 Backend UCX was instantiated", "nixl", StatusNoise, ""},
		{FormatSGLang, "Process 88693: sglang::scheduler_DP1_TP1_EP1_PP0", "py-spy", StatusNoise, ""},
		{FormatSGLang, "Traceback (most recent call last):", "traceback", StatusParsed, "traceback"},
		{FormatSGLang, "sglang-1  | [2025-10-29 11:25:58 TP6] Decode transfer failed for request rank=6 decode_req.req.rid='r' decode_req.req.bootstrap_room=7 with exception KVTransferError(bootstrap_room=7): Aborted by AbortReq.", "sglang", StatusParsed, "decode_transfer_failed"},
		{FormatSGLang, "(SGLangWorker pid=1107016) [2025-04-05 03:20:12 TP0] Init torch distributed begin.", "sglang", StatusNoise, ""},
		{FormatSGLang, "something no one has seen", "bare", StatusUnknown, ""},
		{FormatSGLang, "", "blank", StatusNoise, ""},
	} {
		cl, err := NewClassifier(c.hint, ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := cl.Parse(Record{Raw: []byte(c.line), Lines: 1})
		if c.family == "" {
			c.family = "bare"
		}
		if out.Family != c.family || out.Status != c.status || out.Event != c.event {
			t.Errorf("%.60q under %s: family %q status %s event %q, want %q %s %q", c.line, c.hint, out.Family, out.Status, out.Event, c.family, c.status, c.event)
		}
	}
}

// A JSON object in a source declared gateway is the gateway's, read through
// the user's field mapping, even when it also looks like something else.
func TestClassifierJSONHint(t *testing.T) {
	m := &GatewayMapping{Fields: FieldMapping{"ts": "start", "request_id": "id", "tenant": "who"}}
	cl, err := NewClassifier(FormatGateway, ParseOptions{Gateway: m})
	if err != nil {
		t.Fatal(err)
	}
	out := cl.Parse(Record{Raw: []byte(`{"start":"2026-08-20T10:00:00Z","id":"r1","who":"acme","meta_info":{"id":"x"}}`), Lines: 1})
	if out.Kind != KindGateway || out.Gateway == nil || out.Gateway.Tenant != "acme" {
		t.Errorf("got %+v", out)
	}
}
