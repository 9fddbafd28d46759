package ingest

import (
	"testing"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// BenchmarkAddRecord is the per-record hot path after parsing: boot
// tracking plus building the record's rows.
func BenchmarkAddRecord(b *testing.B) {
	p, _ := parse.New(parse.FormatSGLang, parse.ParseOptions{})
	raw := []byte("[2026-07-01 00:00:01 DP0 TP0] Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: 0.41, #running-req: 1, #queue-req: 2, #pending-token: 24576, #bootstrap-req: 0, #inflight-req: 1, #optimistic-req: 0, cuda graph: False, input throughput (token/s): 15734.14")
	rec := parse.Record{Raw: raw, Length: int64(len(raw)), Lines: 1}
	parsed := p.Parse(rec)
	r := &sourceRun{src: Source{Node: "n", Role: "prefill"}, sourceID: "x", format: parse.FormatSGLang}
	var batch Batch
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if batch.Len() > 4096 {
			batch.reset()
		}
		rec.Offset = int64(i)
		r.boots.Observe(parsed, rec.Offset)
		r.addRecord(&batch, rec, parsed, parsed.TS)
	}
}
