package simulate

import (
	"fmt"
	"path"
	"strconv"
	"time"
)

// Prometheus snapshots: every metricsInterval each running node is
// "scraped"; the samples of one node and UTC day go to
// metrics/<node>/<YYYY-MM-DD>.prom in text exposition format 0.0.4, each
// family once with HELP/TYPE and samples carrying millisecond timestamps
// (scrape time, so no node skew). Buffering one day per node bounds memory.

type metricFamily struct {
	name, typ, help string
}

var families = []metricFamily{
	{"sglang:max_total_num_tokens", "gauge", "Maximum total number of tokens in the KV cache pool."},
	{"sglang:context_len", "gauge", "The context length of the model."},
	{"sglang:page_size", "gauge", "KV cache page size."},
	{"sglang:num_running_reqs", "gauge", "The number of running requests."},
	{"sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue."},
	{"sglang:num_used_tokens", "gauge", "The number of used tokens."},
	{"sglang:token_usage", "gauge", "The token usage."},
	{"sglang:num_prefill_inflight_queue_reqs", "gauge", "The number of requests in the prefill inflight queue."},
	{"sglang:num_decode_transfer_queue_reqs", "gauge", "The number of requests in the decode transfer queue."},
	{"sglang:num_decode_prealloc_queue_reqs", "gauge", "The number of requests in the decode prealloc queue."},
	{"sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed."},
	{"sglang:generation_tokens_total", "counter", "Number of generation tokens processed."},
	{"sglang:cached_tokens_total", "counter", "Number of cached prompt tokens."},
	{"sglang:num_requests_total", "counter", "Number of requests processed."},
	{"sglang:num_aborted_requests_total", "counter", "Number of requests aborted."},
	{"sglang:num_transfer_failed_reqs_total", "counter", "Number of failed transfer requests."},
	{"sglang:num_bootstrap_failed_reqs_total", "counter", "Number of failed bootstrap requests."},
}

type metricSample struct {
	ms int64
	v  float64
}

type metricsBuf struct {
	day    int64 // UTC day number of the buffered samples
	series [][]metricSample
}

func (s *sim) scrape(t int64) {
	ms := (s.base + t) / int64(time.Millisecond)
	day := (s.base + t) / int64(24*time.Hour)
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		if n.met == nil {
			n.met = &metricsBuf{day: day, series: make([][]metricSample, len(families))}
		}
		if n.met.day != day {
			if err := s.flushMetrics(n); err != nil {
				s.setErr(err)
			}
			n.met.day = day
		}
		b := n.cur()
		var run, queue, used, inflight, transfer, prealloc int
		for _, r := range n.ranks {
			run += r.running + r.inflight
			queue += r.queue
			inflight += r.inflight
			transfer += r.transfer
			prealloc += r.prealloc
			if r.pool != nil {
				used += r.pool.used() * s.sc.pageSize
			} else {
				used += r.usedTok
			}
		}
		vals := []float64{float64(b.pool), contextLen, float64(s.sc.pageSize), float64(run), float64(queue), float64(used),
			float64(used) / float64(b.pool*n.dp), float64(inflight), float64(transfer), float64(prealloc),
			n.cPrompt, n.cGen, n.cCached, n.cReqs, n.cAborted, n.cXferFail, n.cBootFail}
		for i, v := range vals {
			n.met.series[i] = append(n.met.series[i], metricSample{ms, v})
		}
	}
}

func (s *sim) flushMetrics(n *node) error {
	m := n.met
	if m == nil || len(m.series[0]) == 0 {
		return nil
	}
	date := time.Unix(m.day*86400, 0).UTC().Format("2006-01-02")
	rel := path.Join("metrics", n.name, date+".prom")
	lw, err := newLineWriter(s.cfg.OutDir, rel, s.base, 0)
	if err != nil {
		return err
	}
	labels := fmt.Sprintf(`{model_name="glm-5.2",engine_type="%s",tp_rank="0",pp_rank="0"}`, n.role)
	for i, f := range families {
		lw.writeLine([]byte("# HELP " + f.name + " " + f.help))
		lw.writeLine([]byte("# TYPE " + f.name + " " + f.typ))
		for _, smp := range m.series[i] {
			b := append(lw.buf[:0], f.name...)
			b = append(b, labels...)
			b = append(b, ' ')
			b = strconv.AppendFloat(b, smp.v, 'g', -1, 64)
			b = append(b, ' ')
			b = strconv.AppendInt(b, smp.ms, 10)
			lw.buf = b
			lw.writeLine(b)
		}
		m.series[i] = m.series[i][:0]
	}
	s.files++
	s.lines += lw.lines
	s.bytes += lw.bytes
	return lw.close()
}
