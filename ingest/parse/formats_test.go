package parse

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestGlog(t *testing.T) {
	p := mustNew(t, FormatGlog, ParseOptions{Year: 2025})
	lines := fixtureLines(t, "glog_real.log")
	out := p.Parse(Record{Raw: []byte(lines[0])})
	eq(t, "preamble", out.Event, "glog_preamble")
	out = p.Parse(Record{Raw: []byte(lines[1])})
	eq(t, "ts", out.TS, utc("2025-09-17T16:23:13.204995Z"))
	eq(t, "inferred", out.TSInferred, false)
	eq(t, "slice", *out.Transfer, TransferEvent{Ranks: NoRanks, Source: "mooncake", Event: "slice_failed", MetadataIndex: -1,
		Reason: "local protection error", Peer: "115.182.224.13:15004", NIC: "mlx5_7"})

	want := []struct{ event, nic, peer string }{
		{"", "", ""}, // listening line: unknown
		{"slice_failed", "mlx5_1", "10.0.0.2:15004"},
		{"rnic_inactive", "mlx5_1", ""},
		{"context_inactive", "mlx5_1", ""},
		{"sync_timeout", "", ""},
		{"transfers_incomplete", "", ""},
		{"device_inactive", "0", ""},
		{"reconnect", "mlx5_1", "10.0.0.2:15004"},
		{"endpoint_retired", "mlx5_1", "10.0.0.2:15004"},
		{"endpoint_retired", "", "10.0.0.2:15004"}, // TENT: the NIC named is the peer's
		{"", "", ""},                  // TENT duplicate bootstrap (INFO): no failure
		{"slice_failed", "", ""},      // Mooncake's first RDMA context: no worker, no peer
		{"submit_failed", "", "rdma"}, // multi_transport.cpp, before the line was commented out
	}
	p = mustNew(t, FormatGlog, ParseOptions{})
	for i, l := range fixtureLines(t, "glog_drift.log") {
		out := p.Parse(Record{Raw: []byte(l)})
		eq(t, l+" event", out.Event, want[i].event)
		if out.Transfer != nil {
			eq(t, l+" nic", out.Transfer.NIC, want[i].nic)
			eq(t, l+" peer", out.Transfer.Peer, want[i].peer)
		}
		// The long form sets the year for the short lines that follow.
		eq(t, l+" year", out.TS.Year(), map[bool]int{true: 2025, false: 2025}[true])
	}
}

func TestGlogYearInference(t *testing.T) {
	p := mustNew(t, FormatGlog, ParseOptions{DefaultTime: utc("2026-02-01T00:00:00Z")})
	a := p.Parse(Record{Raw: []byte("I1231 23:59:59.000000 1 a.cpp:1] Context is not active: mlx5_0")})
	b := p.Parse(Record{Raw: []byte("I0101 00:00:01.000000 1 a.cpp:1] Context is not active: mlx5_0")})
	eq(t, "dec from mtime", a.TS, utc("2025-12-31T23:59:59Z"))
	eq(t, "rollover", b.TS, utc("2026-01-01T00:00:01Z"))
	eq(t, "inferred", b.TSInferred, true)
}

func TestGateway(t *testing.T) {
	p := mustNew(t, FormatGateway, ParseOptions{})
	lines := fixtureLines(t, "gateway.jsonl")
	out := p.Parse(Record{Raw: []byte(lines[0])})
	eq(t, "status", out.Status, StatusParsed)
	eq(t, "ts", out.TS, utc("2026-08-20T10:11:12.123456789Z"))
	eq(t, "resp", *out.Gateway, GatewayResponse{RequestID: "req-1", Tenant: "acme", Model: "glm", Status: 200, PromptTokens: 300,
		CompletionTokens: 20, TTFTMs: 120.5, DurationMs: 900, PrefillEndpoint: "http://p1:30000", DecodeEndpoint: "http://d1:30001",
		BootstrapRoom: math.MaxInt64, PrefillRID: "p-1", DecodeRID: "d-1", Gateway: "gw1"})
	out = p.Parse(Record{Raw: []byte(lines[1])})
	eq(t, "epoch ms", out.TS, utc("2026-08-20T10:31:12.123Z"))
	eq(t, "string room", out.Gateway.BootstrapRoom, uint64(4793981895866140836))
	eq(t, "string status", out.Gateway.Status, uint16(400))
	out = p.Parse(Record{Raw: []byte(lines[2])})
	eq(t, "epoch s", out.TS, utc("2026-08-20T10:31:12.5Z"))

	for _, bad := range []string{`{"request_id":"x"}`, `not json`, `{"ts":"yesterday"}`, `{"ts":1,"bootstrap_room":-1}`, `[1]`} {
		out := p.Parse(Record{Raw: []byte(bad)})
		eq(t, bad, out.Status, StatusMalformed)
	}
}

func TestGatewayMapping(t *testing.T) {
	m := &GatewayMapping{
		Fields: FieldMapping{"ts": "start_time", "tenant": "headers.x-tenant-id", "request_id": "upstream.request_id",
			"status": "response.code", "duration_ms": "timing.total", "bootstrap_room": "meta.room"},
		TimeFormat:   "2006-01-02 15:04:05.000",
		DurationUnit: "s",
		Gateway:      "nginx",
	}
	p := mustNew(t, FormatGateway, ParseOptions{Gateway: m, Location: time.FixedZone("X", 3600)})
	out := p.Parse(Record{Raw: []byte(`{"start_time":"2026-08-20 11:00:00.250","headers":{"x-tenant-id":"acme"},"upstream.request_id":"r9","response":{"code":502},"timing":{"total":1.5},"meta":{"room":"12"}}`)})
	eq(t, "status", out.Status, StatusParsed)
	eq(t, "ts", out.TS, utc("2026-08-20T10:00:00.25Z"))
	eq(t, "resp", *out.Gateway, GatewayResponse{RequestID: "r9", Tenant: "acme", Status: 502, DurationMs: 1500, BootstrapRoom: 12, Gateway: "nginx"})
	if _, err := New(FormatGateway, ParseOptions{Gateway: &GatewayMapping{Fields: FieldMapping{"tenantt": "x"}}}); err == nil {
		t.Error("unknown canonical field accepted")
	}
}

func TestModelGateway(t *testing.T) {
	p := mustNew(t, FormatModelGateway, ParseOptions{})
	real := fixtureLines(t, "modelgateway_real.log")
	for _, l := range real {
		if p.Parse(Record{Raw: []byte(l)}).TS.IsZero() {
			t.Errorf("no ts: %s", l)
		}
	}
	eq(t, "startup", p.Parse(Record{Raw: []byte(real[0])}).Status, StatusUnknown)
	out := p.Parse(Record{Raw: []byte(real[1])})
	eq(t, "stream error", *out.Transfer, TransferEvent{Ranks: NoRanks, Source: "router", Event: "decode_stream_error",
		MetadataIndex: -1, Peer: "http://…", Reason: "Stream error from decode server http://…: error decoding response body"})
	lines := fixtureLines(t, "modelgateway_drift.log")
	out = p.Parse(Record{Raw: []byte(lines[0])})
	eq(t, "text", *out.Gateway, GatewayResponse{RequestID: "gnt-abcdefghijklmnopqrstuvwx", Status: 200, DurationMs: 1.234,
		Gateway: "sgl-model-gateway", Method: "POST", URI: "/generate"})
	eq(t, "text ts", out.TS, utc("2026-08-20T10:11:12.345Z"))
	out = p.Parse(Record{Raw: []byte(lines[1])})
	eq(t, "json", *out.Gateway, GatewayResponse{RequestID: "chatcmpl-xyz", Status: 502, DurationMs: 250,
		Gateway: "sgl-model-gateway", Method: "POST", URI: "/v1/chat/completions"})
	eq(t, "json ts", out.TS, utc("2026-08-20T10:11:12.345678Z"))
}

func TestPrometheus(t *testing.T) {
	def := utc("2026-08-20T00:00:00Z")
	p := mustNew(t, FormatPrometheus, ParseOptions{DefaultTime: def})
	var samples []MetricSample
	for _, l := range append(fixtureLines(t, "prometheus_real.om"), fixtureLines(t, "prometheus_drift.prom")...) {
		out := p.Parse(Record{Raw: []byte(l)})
		samples = append(samples, out.Metrics...)
	}
	eq(t, "n", len(samples), 10)
	eq(t, "om seconds", samples[0].TS, time.Unix(1795824000, 0).UTC())
	eq(t, "colon name", samples[0].Name, "sglang:max_total_num_tokens")
	eq(t, "labels", samples[0].LabelValues, []string{"10.0.1.1:30000"})
	eq(t, "type", samples[0].Type, "gauge")
	b := samples[2]
	eq(t, "ms ts", b.TSMs, int64(1787221872123))
	eq(t, "sorted keys", b.LabelKeys, []string{"engine_type", "le", "model_name", "tp_rank"})
	eq(t, "hist type", b.Type, "histogram")
	eq(t, "default ts", samples[3].TS, def)
	eq(t, "inf bucket", samples[3].LabelValues[1], "+Inf")
	if samples[2].SeriesID == samples[3].SeriesID || samples[4].SeriesID == samples[5].SeriesID {
		t.Error("distinct series share an id")
	}
	// Label order in the input does not change the id.
	s1, _ := parsePromSample(`m{a="1",b="2"} 1`)
	s2, _ := parsePromSample(`m{b="2",a="1"} 1`)
	eq(t, "series id order", s1.SeriesID, s2.SeriesID)
	eq(t, "summary nan", math.IsNaN(samples[6].Value), true)
	eq(t, "om float ts", samples[7].TS, utc("2026-08-20T10:31:12.5Z"))
	eq(t, "utf8 name", samples[9].Name, "sglang.utf8_name")
	eq(t, "escapes", samples[9].LabelValues, []string{"a\"b\\c\nd"})
	for _, bad := range []string{`m{a=1} 1`, `m{a="1" 1`, `m x`, `m 1 2 3`, `{} 1`} {
		eq(t, bad, p.Parse(Record{Raw: []byte(bad)}).Status, StatusMalformed)
	}
}

func TestPagesAndRequestMetrics(t *testing.T) {
	p := mustNew(t, FormatPageEvents, ParseOptions{})
	ls := fixtureLines(t, "pages.jsonl")
	out := p.Parse(Record{Raw: []byte(ls[0])})
	eq(t, "page", *out.Page, PageEvent{Node: "d1", DPRank: 2, Event: "write", RID: "r1", BootstrapRoom: math.MaxInt64, Pages: []uint32{1, 2, 3}})
	eq(t, "ts", out.TS, utc("2026-08-20T10:11:12.000000001Z"))
	eq(t, "string room", p.Parse(Record{Raw: []byte(ls[1])}).BootstrapRoom, uint64(5))
	eq(t, "bad event", p.Parse(Record{Raw: []byte(`{"ts":"2026-08-20T10:11:13Z","event":"evict"}`)}).Status, StatusMalformed)

	p = mustNew(t, FormatRequestMetrics, ParseOptions{})
	out = p.Parse(Record{Raw: []byte(fixtureLines(t, "request_metrics.jsonl")[0])})
	eq(t, "status", out.Status, StatusParsed)
	eq(t, "event", *out.Engine, EngineEvent{Ranks: NoRanks, Event: "request_metrics", RID: "rm1", BootstrapRoom: 9223372036854775801,
		BootstrapHost: "10.0.0.1", BootstrapPort: 8998, PromptTokens: 12, CompletionTokens: 8, CachedTokens: 4, FinishType: "stop", E2ELatencyMs: 500})
	eq(t, "ts", out.TS, utc("2026-08-20T10:31:12.5Z"))
}

func TestDetect(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Format
	}{
		{"hello\nworld\n", FormatUnknown},
		{"", FormatUnknown},
		{"[2026-07-06 10:00:02] {\"timestamp\": \"x\", \"event\": \"request.received\"}\n", FormatSGLangJSON},
		{"2026-04-15 17:13:10,123 INFO memory_pool._finalize_allocation_log: KV Cache is allocated.\n", FormatSGLang},
		{"sglang:num_running_reqs{a=\"b\"} 3\n", FormatPrometheus},
	} {
		eq(t, c.in, Detect([]byte(c.in)), c.want)
	}
}

func TestBootTracker(t *testing.T) {
	p := mustNew(t, FormatSGLang, ParseOptions{})
	lines := []string{
		"[2026-07-06 10:00:01] server_args=ServerArgs(model_path='m', tp_size=2, page_size=64, context_length=None, disaggregation_mode='prefill', allow_auto_truncate=False)",
		"[2026-07-06 10:00:30 TP0] KV Cache is allocated. #tokens: 284928, K size: 7.26 GB, V size: 7.26 GB",
		"[2026-07-06 10:00:31 TP0] max_total_num_tokens=284928, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=1048576, available_gpu_mem=21.09 GB",
		"[2026-07-06 10:01:00 TP0] Prefill batch, #new-seq: 1, #new-token: 10",
		"[2026-07-06 11:00:31 TP0] max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=1048576, available_gpu_mem=21.09 GB",
		"[2026-07-06 12:00:01] server_args=ServerArgs(model_path='m2')",
	}
	var tr BootTracker
	var got []BootFacts
	for i, l := range lines {
		if f, ok := tr.Observe(p.Parse(Record{Raw: []byte(l)}), int64(i*1000)); ok {
			got = append(got, f)
		}
	}
	eq(t, "updates", len(got), 5)
	b := got[2]
	eq(t, "facts", b.Facts, uint32(3))
	eq(t, "boot ts", b.BootTS, utc("2026-07-06T10:00:01Z"))
	eq(t, "kv", b.KVPoolTokens, uint64(284928))
	eq(t, "limit", b.MaxReqInputLen, uint64(284922))
	eq(t, "page", b.PageSize, uint32(64))
	eq(t, "mode", b.DisaggregationMode, "prefill")
	eq(t, "offsets", b.Offsets, []int64{0, 1000, 2000})
	eq(t, "same boot", got[1].BootID, b.BootID)
	eq(t, "restart after batch", got[3].Facts, uint32(1))
	eq(t, "restart ts", got[3].BootTS, utc("2026-07-06T11:00:31Z"))
	if got[3].BootID == b.BootID || got[4].BootID == got[3].BootID {
		t.Error("new boot kept the old boot id")
	}
	eq(t, "new server_args boot", got[4].ModelPath, "m2")
}

// The series cache must not change any result: every line parsed by a
// parser that has seen all of them (cache hits) equals the same line
// parsed by a fresh one (a full parse), valid or not.
func TestPrometheusSeriesCacheChangesNothing(t *testing.T) {
	def := utc("2026-08-20T00:00:00Z")
	lines := append(fixtureLines(t, "prometheus_real.om"), fixtureLines(t, "prometheus_drift.prom")...)
	lines = append(lines,
		`m{a="1",b="2"} 1`, `m{a="1",b="2"} 2 1787221872123`, `m{a="1",b="2"} x`, `m{a="1",b="2"} 1 2 3`,
		`m{a="}"} 3`, `m{a="}"} 4 }`, `m 1`, `m 2 1787221872`, `m x`, `m`, `m{a="1"} 1 # {t="x"} 2`, `{"q.name",a="1"} 5`,
		`m{a="1",b="2"}`, `m{a="1",b="2"}1`)
	warm := mustNew(t, FormatPrometheus, ParseOptions{DefaultTime: def})
	for _, l := range lines {
		warm.Parse(Record{Raw: []byte(l)})
	}
	for _, l := range lines {
		cold := mustNew(t, FormatPrometheus, ParseOptions{DefaultTime: def})
		for _, typeLine := range lines { // the same # TYPE knowledge as warm
			if strings.HasPrefix(typeLine, "#") {
				cold.Parse(Record{Raw: []byte(typeLine)})
			}
		}
		// Printed, not DeepEqual: a NaN sample never equals itself.
		got, want := fmt.Sprintf("%+v", warm.Parse(Record{Raw: []byte(l)})), fmt.Sprintf("%+v", cold.Parse(Record{Raw: []byte(l)}))
		if got != want {
			t.Errorf("%q:\n cached %s\n fresh  %s", l, got, want)
		}
	}
}
