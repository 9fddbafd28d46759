package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The tables ingest writes and their columns, in the order the fills
// below append them. Listed explicitly (never all columns): a column added
// to a table later gets its default until ingest fills it.
var (
	// rawCols leave out source and file_digest (migration 0013): a line
	// names its source by source_ref, a line_sources row.
	rawCols = strings.Fields(`ts ts_ns node role log_format source_ref byte_offset line_no line_id kind parse_status
		parse_error rid bootstrap_room line attr_keys attr_values ingested_at`)
	idCols   = strings.Fields(`id id_kind node ts line_id`)
	bootCols = strings.Fields(`node role boot_ts boot_ts_ns boot_id sglang_version disaggregation_mode transfer_backend model_path
		page_size context_len max_total_num_tokens max_req_input_len max_prefill_tokens chunked_prefill_size
		max_running_requests kv_pool_tokens tp_size dp_size pp_size mem_fraction_static allow_auto_truncate
		arg_keys arg_values line_ids facts ingested_at`)
	engineCols = strings.Fields(`ts ts_ns node role dp_rank tp_rank event rid bootstrap_room bootstrap_host bootstrap_port
		prompt_tokens completion_tokens cached_tokens input_len limit_tokens finish_type finish_message
		status_code e2e_latency_ms line_id msg_index ingested_at`)
	batchCols = strings.Fields(`ts ts_ns node role dp_rank tp_rank kind new_seq new_token cached_token num_token token_usage
		running_req queue_req bootstrap_req inflight_req prealloc_req transfer_req retracted_req throughput
		field_keys field_values line_id msg_index ingested_at`)
	transferCols = strings.Fields(`ts ts_ns node role dp_rank tp_rank source event rid bootstrap_room other_room metadata_index reason
		peer nic line_id msg_index ingested_at`)
	gatewayCols = strings.Fields(`ts ts_ns request_id tenant model status prompt_tokens completion_tokens cached_tokens ttft_ms
		duration_ms prefill_endpoint decode_endpoint bootstrap_room prefill_rid decode_rid gateway line_id
		ingested_at`)
	// metricCols leave out label_keys/label_values (migration 0010): a
	// sample's labels are its series' row in metric_series.
	metricCols = strings.Fields(`ts ts_ms node name series_id value source ingested_at`)
	seriesCols = strings.Fields(`series_id node name label_keys label_values first_seen version ingested_at`)
	pageCols   = strings.Fields(`ts ts_ns node dp_rank event rid bootstrap_room pages line_id msg_index ingested_at`)
	// rawColsNoAttrs is rawCols without the attribute arrays, for batches
	// in which no record has any (every file ingest): the server fills the
	// empty defaults, and the client skips two per-row reflective array
	// appends.
	rawColsNoAttrs = strings.Fields(`ts ts_ns node role log_format source_ref byte_offset line_no line_id kind parse_status
		parse_error rid bootstrap_room line ingested_at`)
)

// blockRows is how many rows go into one native-protocol block. An insert
// of a whole batch is sent as several blocks of one INSERT (the server
// squashes them into parts as before); the driver's column buffers are
// reset, not reallocated, between blocks, so they stay this small instead
// of growing (and being copied) to the size of the batch.
const blockRows = 8192

// tableWrite is one table's share of a batch.
type tableWrite struct {
	name string
	n    int
	cols []string
	// fill appends rows [lo, hi) to x.
	fill func(x TableWriter, lo, hi int) error
}

// key tells the INSERTs of a commit window apart: one per table and
// column list.
func (t tableWrite) key() string { return t.name + "(" + strings.Join(t.cols, ",") + ")" }

// write inserts every non-empty table of b, each as one INSERT (pushes,
// whose acknowledgement waits for it). Tables are written one after
// another; a failure part-way leaves earlier tables written, which is safe
// because nothing is acknowledged and a retry writes the same keys. The
// line_sources rows of sources that sources does not hold yet go first,
// before any line that names them; sources learns them only if the whole
// write is stored.
func write(ctx context.Context, s Store, b *Batch, sources *sourcesSeen) (err error) {
	src, raw, typed := tableWrites(b, time.Now().UTC(), nil, sources)
	defer func() {
		if err == nil {
			sources.committed()
		} else {
			sources.dropped()
		}
	}()
	if src.n > 0 {
		if err := insert(ctx, s, src); err != nil {
			return err
		}
	}
	run := func(list ...tableWrite) error {
		for _, t := range list {
			if t.n > 0 {
				if err := insert(ctx, s, t); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// raw_lines (the bulk) goes on its own connection while the typed
	// tables are written on another: the client's encoding and the
	// server's insert work overlap.
	errc := make(chan error, 1)
	go func() { errc <- run(raw) }()
	terr := run(typed...)
	return errors.Join(<-errc, terr)
}

// tableWrites describes b's rows table by table: line_sources, raw_lines,
// then the typed tables. now is their ingested_at. The series of b's
// metric samples that seen does not hold (nil: none) get a metric_series
// row, written ahead of the samples, so a commit that stores a sample
// stores its series too; likewise the sources of b's lines that sources
// does not hold get a line_sources row. The list has the same tables
// whatever seen holds (streams.add resumes it by index).
func tableWrites(b *Batch, now time.Time, seen *seriesSeen, sources *sourcesSeen) (tableWrite, tableWrite, []tableWrite) {
	b.sortByKey()
	rawNames, rawFill := rawColsNoAttrs, rawColumns(now, false)
	for i := range b.raw {
		if len(b.raw[i].attrKeys) > 0 {
			rawNames, rawFill = rawCols, rawColumns(now, true)
			break
		}
	}
	src := sourcesWrite(b.raw, now, sources)
	raw := tableWrite{"raw_lines", len(b.raw), rawNames, columns(b.raw, rawFill...)}
	typed := []tableWrite{
		{"id_index", len(b.ids), idCols, columns(b.ids,
			col(func(r *idRow) string { return r.id }),
			col(func(r *idRow) string { return r.kind }),
			col(func(r *idRow) string { return r.node }),
			col(func(r *idRow) time.Time { return chTime(r.ts) }),
			col(func(r *idRow) uint64 { return r.lineID }),
		)},
		{"node_boots", len(b.boots), bootCols, func(x TableWriter, lo, hi int) error {
			// A handful of rows per batch: row appends are fine here.
			for _, r := range b.boots[lo:hi] {
				f := r.f
				if err := x.AppendRow(r.node, r.role, chTime(f.BootTS), tsNS(f.BootTS), f.BootID, "", f.DisaggregationMode,
					f.TransferBackend, f.ModelPath, f.PageSize, f.ContextLen, f.MaxTotalNumTokens, f.MaxReqInputLen, f.MaxPrefillTokens,
					f.ChunkedPrefillSize, f.MaxRunningRequests, f.KVPoolTokens, f.TPSize, f.DPSize, f.PPSize, f.MemFractionStatic,
					boolU8(f.AllowAutoTruncate), orEmpty(f.ArgKeys), orEmpty(f.ArgValues), r.lineIDs, f.Facts, now); err != nil {
					return err
				}
			}
			return nil
		}},
		{"engine_events", len(b.engine), engineCols, columns(b.engine,
			col(func(r *engineRow) time.Time { return chTime(r.ts) }),
			col(func(r *engineRow) uint64 { return tsNS(r.ts) }),
			col(func(r *engineRow) string { return r.node }),
			col(func(r *engineRow) string { return r.role }),
			col(func(r *engineRow) int16 { return r.e.Ranks.DP }),
			col(func(r *engineRow) int16 { return r.e.Ranks.TP }),
			col(func(r *engineRow) string { return r.e.Event }),
			col(func(r *engineRow) string { return r.e.RID }),
			col(func(r *engineRow) uint64 { return r.e.BootstrapRoom }),
			col(func(r *engineRow) string { return r.e.BootstrapHost }),
			col(func(r *engineRow) uint32 { return r.e.BootstrapPort }),
			col(func(r *engineRow) uint64 { return r.e.PromptTokens }),
			col(func(r *engineRow) uint64 { return r.e.CompletionTokens }),
			col(func(r *engineRow) uint64 { return r.e.CachedTokens }),
			col(func(r *engineRow) uint64 { return r.e.InputLen }),
			col(func(r *engineRow) uint64 { return r.e.LimitTokens }),
			col(func(r *engineRow) string { return r.e.FinishType }),
			col(func(r *engineRow) string { return r.e.FinishMessage }),
			col(func(r *engineRow) uint16 { return r.e.StatusCode }),
			col(func(r *engineRow) float64 { return r.e.E2ELatencyMs }),
			col(func(r *engineRow) uint64 { return r.lineID }),
			col(func(r *engineRow) uint8 { return r.msgIndex }),
			constant[engineRow](now),
		)},
		{"batch_stats", len(b.batches), batchCols, columns(b.batches,
			col(func(r *batchRow) time.Time { return chTime(r.ts) }),
			col(func(r *batchRow) uint64 { return tsNS(r.ts) }),
			col(func(r *batchRow) string { return r.node }),
			col(func(r *batchRow) string { return r.role }),
			col(func(r *batchRow) int16 { return r.b.Ranks.DP }),
			col(func(r *batchRow) int16 { return r.b.Ranks.TP }),
			col(func(r *batchRow) string { return r.b.Kind }),
			col(func(r *batchRow) uint32 { return r.b.NewSeq }),
			col(func(r *batchRow) uint64 { return r.b.NewToken }),
			col(func(r *batchRow) uint64 { return r.b.CachedToken }),
			col(func(r *batchRow) uint64 { return r.b.NumToken }),
			col(func(r *batchRow) float64 { return r.b.TokenUsage }),
			col(func(r *batchRow) int32 { return r.b.RunningReq }),
			col(func(r *batchRow) int32 { return r.b.QueueReq }),
			col(func(r *batchRow) int32 { return r.b.BootstrapReq }),
			col(func(r *batchRow) int32 { return r.b.InflightReq }),
			col(func(r *batchRow) int32 { return r.b.PreallocReq }),
			col(func(r *batchRow) int32 { return r.b.TransferReq }),
			col(func(r *batchRow) int32 { return r.b.RetractedReq }),
			col(func(r *batchRow) float64 { return r.b.Throughput }),
			col(func(r *batchRow) []string { return orEmpty(r.b.FieldKeys) }),
			col(func(r *batchRow) []string { return orEmpty(r.b.FieldValues) }),
			col(func(r *batchRow) uint64 { return r.lineID }),
			col(func(r *batchRow) uint8 { return r.msgIndex }),
			constant[batchRow](now),
		)},
		{"transfer_events", len(b.transfer), transferCols, columns(b.transfer,
			col(func(r *transferRow) time.Time { return chTime(r.ts) }),
			col(func(r *transferRow) uint64 { return tsNS(r.ts) }),
			col(func(r *transferRow) string { return r.node }),
			col(func(r *transferRow) string { return r.role }),
			col(func(r *transferRow) int16 { return r.t.Ranks.DP }),
			col(func(r *transferRow) int16 { return r.t.Ranks.TP }),
			col(func(r *transferRow) string { return r.t.Source }),
			col(func(r *transferRow) string { return r.t.Event }),
			col(func(r *transferRow) string { return r.t.RID }),
			col(func(r *transferRow) uint64 { return r.t.BootstrapRoom }),
			col(func(r *transferRow) uint64 { return r.t.OtherRoom }),
			col(func(r *transferRow) int64 { return r.t.MetadataIndex }),
			col(func(r *transferRow) string { return r.t.Reason }),
			col(func(r *transferRow) string { return r.t.Peer }),
			col(func(r *transferRow) string { return r.t.NIC }),
			col(func(r *transferRow) uint64 { return r.lineID }),
			col(func(r *transferRow) uint8 { return r.msgIndex }),
			constant[transferRow](now),
		)},
		{"gateway_responses", len(b.gateway), gatewayCols, columns(b.gateway,
			col(func(r *gatewayRow) time.Time { return chTime(r.ts) }),
			col(func(r *gatewayRow) uint64 { return tsNS(r.ts) }),
			col(func(r *gatewayRow) string { return r.g.RequestID }),
			col(func(r *gatewayRow) string { return r.g.Tenant }),
			col(func(r *gatewayRow) string { return r.g.Model }),
			col(func(r *gatewayRow) uint16 { return r.g.Status }),
			col(func(r *gatewayRow) uint64 { return r.g.PromptTokens }),
			col(func(r *gatewayRow) uint64 { return r.g.CompletionTokens }),
			col(func(r *gatewayRow) uint64 { return r.g.CachedTokens }),
			col(func(r *gatewayRow) float64 { return r.g.TTFTMs }),
			col(func(r *gatewayRow) float64 { return r.g.DurationMs }),
			col(func(r *gatewayRow) string { return r.g.PrefillEndpoint }),
			col(func(r *gatewayRow) string { return r.g.DecodeEndpoint }),
			col(func(r *gatewayRow) uint64 { return r.g.BootstrapRoom }),
			col(func(r *gatewayRow) string { return r.g.PrefillRID }),
			col(func(r *gatewayRow) string { return r.g.DecodeRID }),
			col(func(r *gatewayRow) string {
				if r.g.Gateway == "" {
					return r.node
				}
				return r.g.Gateway
			}),
			col(func(r *gatewayRow) uint64 { return r.lineID }),
			constant[gatewayRow](now),
		)},
		seriesWrite(b.metrics, now, seen),
		{"metric_samples", len(b.metrics), metricCols, metricColumns(b.metrics, now)},
		{"page_events", len(b.pages), pageCols, columns(b.pages,
			col(func(r *pageRow) time.Time { return chTime(r.ts) }),
			col(func(r *pageRow) uint64 { return tsNS(r.ts) }),
			col(func(r *pageRow) string { return r.node }),
			col(func(r *pageRow) int16 { return r.p.DPRank }),
			col(func(r *pageRow) string { return r.p.Event }),
			col(func(r *pageRow) string { return r.p.RID }),
			col(func(r *pageRow) uint64 { return r.p.BootstrapRoom }),
			col(func(r *pageRow) []uint32 {
				if r.p.Pages == nil {
					return []uint32{}
				}
				return r.p.Pages
			}),
			col(func(r *pageRow) uint64 { return r.lineID }),
			col(func(r *pageRow) uint8 { return r.msgIndex }),
			constant[pageRow](now),
		)},
	}
	return src, raw, typed
}

// rawColumns are raw_lines' columns in rawCols's order (without the
// attribute arrays unless attrs).
func rawColumns(now time.Time, attrs bool) []func([]rawRow) any {
	cols := []func([]rawRow) any{
		col(func(r *rawRow) time.Time { return chTime(r.ts) }),
		col(func(r *rawRow) uint64 { return tsNS(r.ts) }),
		col(func(r *rawRow) string { return r.node }),
		col(func(r *rawRow) string { return r.role }),
		col(func(r *rawRow) string { return r.format }),
		col(func(r *rawRow) uint64 { return r.ref }),
		col(func(r *rawRow) uint64 { return r.offset }),
		col(func(r *rawRow) uint64 { return r.lineNo }),
		col(func(r *rawRow) uint64 { return r.lineID }),
		col(func(r *rawRow) string { return r.kind }),
		col(func(r *rawRow) string { return r.status }),
		col(func(r *rawRow) string { return r.reason }),
		col(func(r *rawRow) string { return r.rid }),
		col(func(r *rawRow) uint64 { return r.room }),
		col(func(r *rawRow) string { return r.line }),
	}
	if attrs {
		cols = append(cols,
			col(func(r *rawRow) []string { return orEmpty(r.attrKeys) }),
			col(func(r *rawRow) []string { return orEmpty(r.attrValues) }))
	}
	return append(cols, constant[rawRow](now))
}

// insert writes t as one INSERT of blocks of at most blockRows rows.
func insert(ctx context.Context, s Store, t tableWrite) error {
	x, err := s.OpenInsert(ctx, t.name, t.cols)
	if err != nil {
		return fmt.Errorf("prepare insert into %s: %w", t.name, err)
	}
	for lo := 0; lo < t.n; lo += blockRows {
		hi := min(lo+blockRows, t.n)
		if err := t.fill(x, lo, hi); err != nil {
			_ = x.Abort()
			return fmt.Errorf("append to %s: %w", t.name, err)
		}
		if hi < t.n {
			if err := x.Flush(); err != nil {
				_ = x.Abort()
				return fmt.Errorf("insert %d rows into %s: %w", t.n, t.name, err)
			}
		}
	}
	if err := x.Send(); err != nil {
		return fmt.Errorf("insert %d rows into %s: %w", t.n, t.name, err)
	}
	return nil
}

// columns returns a fill that appends rows[lo:hi] one column at a time, in
// the order of cols (the INSERT's column order).
func columns[R any](rows []R, cols ...func([]R) any) func(TableWriter, int, int) error {
	return func(x TableWriter, lo, hi int) error {
		chunk := rows[lo:hi]
		vals := make([]any, len(cols))
		for i, c := range cols {
			vals[i] = c(chunk)
		}
		return x.AppendColumns(vals...)
	}
}

// col turns a field accessor into a column extractor.
func col[R, T any](f func(*R) T) func([]R) any {
	return func(rows []R) any {
		out := make([]T, len(rows))
		for i := range rows {
			out[i] = f(&rows[i])
		}
		return out
	}
}

// constant is a column holding v in every row (ingested_at).
func constant[R any](v time.Time) func([]R) any {
	return func(rows []R) any {
		out := make([]time.Time, len(rows))
		for i := range out {
			out[i] = v
		}
		return out
	}
}

// orEmpty turns a nil slice into an empty one (an empty Array).
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func boolU8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
