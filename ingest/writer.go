package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Store is what ingest needs from ClickHouse (internal/chstore.Store).
type Store interface {
	PrepareBatch(ctx context.Context, insert string) (driver.Batch, error)
	QueryRow(ctx context.Context, sql string, args ...any) driver.Row
	Exec(ctx context.Context, sql string, args ...any) error
}

// Column lists, spelled out: 18.16 learns zero columns from a column-less
// INSERT, and explicit lists keep inserts correct when columns are added.
const (
	insertRaw = `INSERT INTO raw_lines (ts, ts_ns, node, role, log_format, source, file_digest, byte_offset, line_no,
 line_id, kind, parse_status, parse_error, rid, bootstrap_room, line, attr_keys, attr_values, ingested_at)`
	insertIDs   = `INSERT INTO id_index (id, id_kind, node, ts, line_id)`
	insertBoots = `INSERT INTO node_boots (node, role, boot_ts, boot_ts_ns, boot_id, sglang_version, disaggregation_mode,
 transfer_backend, model_path, page_size, context_len, max_total_num_tokens, max_req_input_len, max_prefill_tokens,
 chunked_prefill_size, max_running_requests, kv_pool_tokens, tp_size, dp_size, pp_size, mem_fraction_static,
 allow_auto_truncate, arg_keys, arg_values, line_ids, facts, ingested_at)`
	insertEngine = `INSERT INTO engine_events (ts, ts_ns, node, role, dp_rank, tp_rank, event, rid, bootstrap_room,
 bootstrap_host, bootstrap_port, prompt_tokens, completion_tokens, cached_tokens, input_len, limit_tokens,
 finish_type, finish_message, status_code, e2e_latency_ms, line_id, ingested_at)`
	insertBatch = `INSERT INTO batch_stats (ts, ts_ns, node, role, dp_rank, tp_rank, kind, new_seq, new_token,
 cached_token, num_token, token_usage, running_req, queue_req, bootstrap_req, inflight_req, prealloc_req,
 transfer_req, retracted_req, throughput, field_keys, field_values, line_id, ingested_at)`
	insertTransfer = `INSERT INTO transfer_events (ts, ts_ns, node, role, dp_rank, tp_rank, source, event, rid,
 bootstrap_room, other_room, metadata_index, reason, peer, nic, line_id, ingested_at)`
	insertGateway = `INSERT INTO gateway_responses (ts, ts_ns, request_id, tenant, model, status, prompt_tokens,
 completion_tokens, cached_tokens, ttft_ms, duration_ms, prefill_endpoint, decode_endpoint, bootstrap_room,
 prefill_rid, decode_rid, gateway, line_id, ingested_at)`
	insertMetrics = `INSERT INTO metric_samples (ts, ts_ms, node, name, series_id, label_keys, label_values, value,
 source, ingested_at)`
	insertPages = `INSERT INTO page_events (ts, ts_ns, node, dp_rank, event, rid, bootstrap_room, pages, line_id,
 ingested_at)`
)

// write inserts every non-empty table of b. Tables are written one after
// another; a failure part-way leaves earlier tables written, which is safe
// because the checkpoint is not advanced and a retry writes the same keys.
func write(ctx context.Context, s Store, b *Batch) error {
	now := time.Now().UTC()
	steps := []struct {
		name  string
		n     int
		sql   string
		apply func(driver.Batch) error
	}{
		{"raw_lines", len(b.raw), insertRaw, func(x driver.Batch) error {
			// Columnar: one Append per column instead of reflection per
			// row; raw_lines is the biggest insert by far.
			n := len(b.raw)
			ts, tsns := make([]time.Time, n), make([]uint64, n)
			node, role, format, source, digest := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			off, lineNo, lineID, room := make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n)
			kind, status, reason, rid, line := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			keys, vals, at := make([][]string, n), make([][]string, n), make([]time.Time, n)
			for i, r := range b.raw {
				ts[i], tsns[i] = chTime(r.ts), tsNS(r.ts)
				node[i], role[i], format[i], source[i], digest[i] = r.node, r.role, r.format, r.source, r.digest
				off[i], lineNo[i], lineID[i], room[i] = r.offset, r.lineNo, r.lineID, r.room
				kind[i], status[i], reason[i], rid[i], line[i] = r.kind, r.status, r.reason, r.rid, r.line
				keys[i], vals[i], at[i] = orEmpty(r.attrKeys), orEmpty(r.attrValues), now
			}
			return appendColumns(x, ts, tsns, node, role, format, source, digest, off, lineNo, lineID, kind, status, reason, rid, room, line, keys, vals, at)
		}},
		{"id_index", len(b.ids), insertIDs, func(x driver.Batch) error {
			n := len(b.ids)
			id, kind, node, ts, lineID := make([]string, n), make([]string, n), make([]string, n), make([]time.Time, n), make([]uint64, n)
			for i, r := range b.ids {
				id[i], kind[i], node[i], ts[i], lineID[i] = r.id, r.kind, r.node, chTime(r.ts), r.lineID
			}
			return appendColumns(x, id, kind, node, ts, lineID)
		}},
		{"node_boots", len(b.boots), insertBoots, func(x driver.Batch) error {
			for _, r := range b.boots {
				f := r.f
				keys, vals := f.ArgKeys, f.ArgValues
				if keys == nil {
					keys, vals = []string{}, []string{}
				}
				if err := x.Append(r.node, r.role, chTime(f.BootTS), tsNS(f.BootTS), f.BootID, "", f.DisaggregationMode,
					f.TransferBackend, f.ModelPath, f.PageSize, f.ContextLen, f.MaxTotalNumTokens, f.MaxReqInputLen, f.MaxPrefillTokens,
					f.ChunkedPrefillSize, f.MaxRunningRequests, f.KVPoolTokens, f.TPSize, f.DPSize, f.PPSize, f.MemFractionStatic,
					boolU8(f.AllowAutoTruncate), keys, vals, r.lineIDs, f.Facts, now); err != nil {
					return err
				}
			}
			return nil
		}},
		{"engine_events", len(b.engine), insertEngine, func(x driver.Batch) error {
			for _, r := range b.engine {
				e := r.e
				if err := x.Append(chTime(r.ts), tsNS(r.ts), r.node, r.role, e.Ranks.DP, e.Ranks.TP, e.Event, e.RID, e.BootstrapRoom,
					e.BootstrapHost, e.BootstrapPort, e.PromptTokens, e.CompletionTokens, e.CachedTokens, e.InputLen, e.LimitTokens,
					e.FinishType, e.FinishMessage, e.StatusCode, e.E2ELatencyMs, r.lineID, now); err != nil {
					return err
				}
			}
			return nil
		}},
		{"batch_stats", len(b.batches), insertBatch, func(x driver.Batch) error {
			for _, r := range b.batches {
				s := r.b
				keys, vals := s.FieldKeys, s.FieldValues
				if keys == nil {
					keys, vals = []string{}, []string{}
				}
				if err := x.Append(chTime(r.ts), tsNS(r.ts), r.node, r.role, s.Ranks.DP, s.Ranks.TP, s.Kind, s.NewSeq, s.NewToken,
					s.CachedToken, s.NumToken, s.TokenUsage, s.RunningReq, s.QueueReq, s.BootstrapReq, s.InflightReq, s.PreallocReq,
					s.TransferReq, s.RetractedReq, s.Throughput, keys, vals, r.lineID, now); err != nil {
					return err
				}
			}
			return nil
		}},
		{"transfer_events", len(b.transfer), insertTransfer, func(x driver.Batch) error {
			for _, r := range b.transfer {
				t := r.t
				if err := x.Append(chTime(r.ts), tsNS(r.ts), r.node, r.role, t.Ranks.DP, t.Ranks.TP, t.Source, t.Event, t.RID,
					t.BootstrapRoom, t.OtherRoom, t.MetadataIndex, t.Reason, t.Peer, t.NIC, r.lineID, now); err != nil {
					return err
				}
			}
			return nil
		}},
		{"gateway_responses", len(b.gateway), insertGateway, func(x driver.Batch) error {
			for _, r := range b.gateway {
				g := r.g
				gw := g.Gateway
				if gw == "" {
					gw = r.node
				}
				if err := x.Append(chTime(r.ts), tsNS(r.ts), g.RequestID, g.Tenant, g.Model, g.Status, g.PromptTokens,
					g.CompletionTokens, g.CachedTokens, g.TTFTMs, g.DurationMs, g.PrefillEndpoint, g.DecodeEndpoint, g.BootstrapRoom,
					g.PrefillRID, g.DecodeRID, gw, r.lineID, now); err != nil {
					return err
				}
			}
			return nil
		}},
		{"metric_samples", len(b.metrics), insertMetrics, func(x driver.Batch) error {
			n := len(b.metrics)
			ts, ms, node, name, series := make([]time.Time, n), make([]uint64, n), make([]string, n), make([]string, n), make([]uint64, n)
			keys, vals, value, source, at := make([][]string, n), make([][]string, n), make([]float64, n), make([]string, n), make([]time.Time, n)
			for i, r := range b.metrics {
				m := r.m
				ts[i], ms[i] = chTime(m.TS), uint64(max(m.TSMs, 0))
				node[i], name[i], series[i] = r.node, m.Name, m.SeriesID
				keys[i], vals[i], value[i], source[i], at[i] = orEmpty(m.LabelKeys), orEmpty(m.LabelValues), m.Value, r.source, now
			}
			return appendColumns(x, ts, ms, node, name, series, keys, vals, value, source, at)
		}},
		{"page_events", len(b.pages), insertPages, func(x driver.Batch) error {
			for _, r := range b.pages {
				p := r.p
				pages := p.Pages
				if pages == nil {
					pages = []uint32{}
				}
				if err := x.Append(chTime(r.ts), tsNS(r.ts), r.node, p.DPRank, p.Event, p.RID, p.BootstrapRoom, pages, r.lineID, now); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	// raw_lines (the bulk) goes on its own connection while the typed
	// tables are written on another: the client's encoding and the
	// server's insert work overlap.
	type step = struct {
		name  string
		n     int
		sql   string
		apply func(driver.Batch) error
	}
	run := func(list []step) error {
		for _, st := range list {
			if st.n == 0 {
				continue
			}
			x, err := s.PrepareBatch(ctx, st.sql)
			if err != nil {
				return fmt.Errorf("prepare insert into %s: %w", st.name, err)
			}
			if err := st.apply(x); err != nil {
				_ = x.Abort()
				return fmt.Errorf("append to %s: %w", st.name, err)
			}
			if err := x.Send(); err != nil {
				return fmt.Errorf("insert %d rows into %s: %w", st.n, st.name, err)
			}
		}
		return nil
	}
	errc := make(chan error, 1)
	go func() { errc <- run(steps[:1]) }()
	err := run(steps[1:])
	return errors.Join(<-errc, err)
}

// appendColumns appends one slice per column, in the INSERT's column order.
func appendColumns(x driver.Batch, cols ...any) error {
	for i, c := range cols {
		if err := x.Column(i).Append(c); err != nil {
			return fmt.Errorf("column %d: %w", i, err)
		}
	}
	return nil
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
