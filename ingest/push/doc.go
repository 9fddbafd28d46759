// Package push decodes log lines pushed to kvtrail over HTTP and hands them
// to a Sink. It is plain net/http code so it can be mounted into any router.
//
// Two wire formats are accepted.
//
// # Loki push (POST /loki/api/v1/push)
//
// The request shape used by promtail, Grafana Alloy, Vector and Fluent Bit:
//
//   - Content-Type application/x-protobuf (or no Content-Type, as Loki
//     does): a snappy block-compressed logproto.PushRequest. Stream labels
//     arrive as a selector string such as {job="sglang", node="n1"};
//     per-entry structured metadata is kept.
//   - Content-Type application/json:
//     {"streams":[{"stream":{"job":"x"},"values":[["<unix ns>","line"],["<unix ns>","line",{"k":"v"}]]}]}
//     The optional third element of a value is the structured metadata. The
//     legacy shape {"streams":[{"labels":"{job=\"x\"}","entries":[{"ts":"<RFC3339>","line":"…"}]}]},
//     which loki-client-go emits in JSON mode, is accepted too.
//
// # NDJSON (POST /ingest/v1/lines)
//
// One JSON object per line; blank lines are skipped, unknown fields ignored:
//
//	{"ts": "2024-05-01T12:00:00.123456789Z", "line": "…", "labels": {"job": "sglang"}, "node": "n1",
//	"role": "prefill", "format": "sglang-scheduler", "metadata": {"rid": "…"}}
//
// (shown wrapped; on the wire each object is on one line). Fields:
//
//   - line (required): the log line, a JSON string.
//   - ts (optional): an RFC 3339 string, or a JSON number of seconds since
//     the Unix epoch (a fraction gives sub-second precision, up to
//     nanoseconds). If absent or null, the time the request was received
//     is used.
//   - labels (optional): stream labels, string to string.
//   - node, role, format (optional): shorthand for the stream labels of the
//     same name; when set they override an entry of the same name in labels.
//   - metadata (optional): per-entry structured metadata, string to string.
//
// # Both formats
//
// The body may be Content-Encoding gzip or deflate (zlib-wrapped or raw) or
// uncompressed. The compressed and the decompressed size are capped
// (Limits); so are the number of entries and the size of one line. The tenant
// is the X-Scope-OrgID header.
//
// Log lines are kept byte for byte: invalid UTF-8 is neither dropped nor
// replaced (a lone \u surrogate escape in JSON becomes U+FFFD, as nothing
// else can represent it). Errors never quote the request body, because
// bodies carry customer prompts.
package push
