-- Modern servers only (19.x+; tested on 26.7): a DateTime64 event time next
-- to ts + ts_ns, and skip indexes for two more id lookups. On 18.16 (no
-- DateTime64, no skip indexes) this migration renders to nothing and is
-- recorded as applied (docs/clickhouse.md, "Which features are used on
-- which versions").
--
-- Why ts itself stays DateTime: kvtrail sends one SQL text to every server,
-- and that text compares ts with whole-second bounds (ts <= toDateTime(?),
-- the request search's keyset bound ts <= truncated cursor). On a second-
-- precision ts those include the whole bound second; on a nanosecond ts they
-- would drop the rows inside it, so the same statement would answer
-- differently on the two servers. Readers that need full precision read
-- ts_ns, which every writer fills. So the nanosecond time is added as a
-- MATERIALIZED column computed from ts_ns: no INSERT names it (their column
-- lists stay valid), SELECT * does not return it, no kvtrail query reads it,
-- and results are the same on both renderings by construction. It is there
-- for people querying the data directly (Grafana, clickhouse-client):
-- event_time is the exact time as DateTime64(9, 'UTC'); node_boots has
-- boot_time, metric_samples a millisecond event_time from ts_ms.
--
-- ADD COLUMN applies to parts written from now on and is computed on read
-- mutation). On a cluster the Distributed tables get the same column, so
-- it can be read through them; their inserts leave it to the shards.
{{if modern}}
ALTER TABLE {{table "raw_lines"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) CODEC(Delta, ZSTD(1)) AFTER ts_ns;
ALTER TABLE {{table "engine_events"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) CODEC(Delta, ZSTD(1)) AFTER ts_ns;
ALTER TABLE {{table "batch_stats"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) CODEC(Delta, ZSTD(1)) AFTER ts_ns;
ALTER TABLE {{table "transfer_events"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) CODEC(Delta, ZSTD(1)) AFTER ts_ns;
ALTER TABLE {{table "gateway_responses"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) CODEC(Delta, ZSTD(1)) AFTER ts_ns;
ALTER TABLE {{table "page_events"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) CODEC(Delta, ZSTD(1)) AFTER ts_ns;
ALTER TABLE {{table "request_facts"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) CODEC(Delta, ZSTD(1)) AFTER ts_ns;
ALTER TABLE {{table "case_evidence"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) CODEC(Delta, ZSTD(1)) AFTER ts_ns;
ALTER TABLE {{table "audit_log"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) CODEC(Delta, ZSTD(1)) AFTER ts_ns;
ALTER TABLE {{table "probes"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) CODEC(Delta, ZSTD(1)) AFTER ts_ns;
ALTER TABLE {{table "node_boots"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS boot_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(boot_ts_ns)) CODEC(Delta, ZSTD(1)) AFTER boot_ts_ns;
ALTER TABLE {{table "metric_samples"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(3, 'UTC') MATERIALIZED fromUnixTimestamp64Milli(toInt64(ts_ms)) CODEC(Delta, ZSTD(1)) AFTER ts_ms;
{{if dist "raw_lines"}}
ALTER TABLE {{dist "raw_lines"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) AFTER ts_ns;
ALTER TABLE {{dist "engine_events"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) AFTER ts_ns;
ALTER TABLE {{dist "batch_stats"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) AFTER ts_ns;
ALTER TABLE {{dist "transfer_events"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) AFTER ts_ns;
ALTER TABLE {{dist "gateway_responses"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) AFTER ts_ns;
ALTER TABLE {{dist "page_events"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) AFTER ts_ns;
ALTER TABLE {{dist "request_facts"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) AFTER ts_ns;
ALTER TABLE {{dist "case_evidence"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) AFTER ts_ns;
ALTER TABLE {{dist "audit_log"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) AFTER ts_ns;
ALTER TABLE {{dist "probes"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(ts_ns)) AFTER ts_ns;
ALTER TABLE {{dist "node_boots"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS boot_time DateTime64(9, 'UTC') MATERIALIZED fromUnixTimestamp64Nano(toInt64(boot_ts_ns)) AFTER boot_ts_ns;
ALTER TABLE {{dist "metric_samples"}} {{on_cluster}} ADD COLUMN IF NOT EXISTS event_time DateTime64(3, 'UTC') MATERIALIZED fromUnixTimestamp64Milli(toInt64(ts_ms)) AFTER ts_ms;
{{end}}
-- Two lookups the sorting keys do not lead with and 0006 does not cover:
--   findings.run_id: every reader of current findings filters
--     has(current run ids, run_id) (analyze.CurrentFindingsFrom);
--   engine_events / transfer_events line_id: the request page reads a
--     request's events by has(evidence line ids, line_id) within its span.
-- has(constant array, column) is answered by a bloom_filter index (26.7
-- rewrites it to IN; internal/chdbtier checks the plan).
ALTER TABLE {{table "findings"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_run_id run_id TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "engine_events"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_line_id line_id TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "transfer_events"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_line_id line_id TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "findings"}} {{on_cluster}} MATERIALIZE INDEX idx_run_id;
ALTER TABLE {{table "engine_events"}} {{on_cluster}} MATERIALIZE INDEX idx_line_id;
ALTER TABLE {{table "transfer_events"}} {{on_cluster}} MATERIALIZE INDEX idx_line_id;
{{end}}
