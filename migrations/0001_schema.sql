-- kvtrail schema, version 1.
--
-- One source renders both deployments (template functions: docs/clickhouse.md):
-- on a single server "table" names the table itself; in cluster mode it names
-- the shard-local Replicated table and "distributed" adds the Distributed
-- table that readers and writers use.
-- Keep to the portable subset (docs/clickhouse.md): no CODEC, TTL, skip
-- indexes, Map, DateTime64 or IF NOT EXISTS on columns, so every statement runs
-- on ClickHouse 18.16 and on 24.x+.
--
-- Timestamps: ts DateTime (UTC seconds) is the partition/sort column; ts_ns
-- keeps full precision (no DateTime64 on 18.16). A 0 in an id column means
-- "not known" (bootstrap rooms are random 63-bit numbers, so 0 is never real).

-- raw_lines: every ingested line, parsed or not, is kept as evidence.
-- line_id = FNV-64a(file_digest, byte_offset) is the stable evidence reference
-- that findings, facts and exports point to. Re-ingesting a file writes the
-- same keys, which the Replacing engine folds together. attr_keys/attr_values
-- keep a pushed entry's stream labels ("label.x") and structured metadata
-- ("meta.x").
CREATE TABLE IF NOT EXISTS {{table "raw_lines"}} {{on_cluster}}
(
    ts            DateTime,
    ts_ns         UInt64,
    node          LowCardinality(String),
    role          LowCardinality(String),
    log_format    LowCardinality(String),
    source        String,
    file_digest   String,
    byte_offset   UInt64,
    line_no       UInt64,
    line_id       UInt64,
    kind          LowCardinality(String),
    parse_status  LowCardinality(String),
    parse_error   String,
    rid           String,
    bootstrap_room UInt64,
    line          String,
    attr_keys     Array(String),
    attr_values   Array(String),
    ingested_at   DateTime
)
ENGINE = {{engine "raw_lines" "ReplacingMergeTree"}}
PARTITION BY toMonday(ts)
ORDER BY (node, ts, line_id)
SETTINGS index_granularity = 8192;
{{distributed "raw_lines" "if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room))"}}

-- id_index: id -> where and when it was seen. Turns "find request X" into a
-- primary-key read instead of a scan (the trace_id_ts pattern of the OTel
-- exporter). id_kind is rid, room, request_id or tenant.
CREATE TABLE IF NOT EXISTS {{table "id_index"}} {{on_cluster}}
(
    id        String,
    id_kind   LowCardinality(String),
    node      LowCardinality(String),
    ts        DateTime,
    line_id   UInt64
)
ENGINE = {{engine "id_index" "ReplacingMergeTree"}}
PARTITION BY toYYYYMM(ts)
ORDER BY (id, id_kind, node, ts, line_id)
SETTINGS index_granularity = 8192;
{{distributed "id_index" "cityHash64(id)"}}

-- node_boots: one row per engine start, with the limits in force until the
-- next boot. Rebuilt as startup facts arrive; facts counts the lines folded in
-- so the most complete version wins.
CREATE TABLE IF NOT EXISTS {{table "node_boots"}} {{on_cluster}}
(
    node                 LowCardinality(String),
    role                 LowCardinality(String),
    boot_ts              DateTime,
    boot_ts_ns           UInt64,
    boot_id              String,
    sglang_version       String,
    disaggregation_mode  LowCardinality(String),
    transfer_backend     LowCardinality(String),
    model_path           String,
    page_size            UInt32,
    context_len          UInt64,
    max_total_num_tokens UInt64,
    max_req_input_len    UInt64,
    max_prefill_tokens   UInt64,
    chunked_prefill_size Int64,
    max_running_requests UInt64,
    kv_pool_tokens       UInt64,
    tp_size              UInt16,
    dp_size              UInt16,
    pp_size              UInt16,
    mem_fraction_static  Float64,
    allow_auto_truncate  UInt8,
    arg_keys             Array(String),
    arg_values           Array(String),
    line_ids             Array(UInt64),
    facts                UInt32,
    ingested_at          DateTime
)
ENGINE = {{engine "node_boots" "ReplacingMergeTree(facts)"}}
PARTITION BY toYYYYMM(boot_ts)
ORDER BY (node, boot_ts, boot_id)
SETTINGS index_granularity = 8192;
{{distributed "node_boots" "cityHash64(node)"}}

-- nodes: how each node is named elsewhere. Gateway logs name prefill and
-- decode instances by endpoint (http://10.0.0.11:30000) and decode lines name
-- the prefill by bootstrap_host; the sources manifest declares them.
CREATE TABLE IF NOT EXISTS {{table "nodes"}} {{on_cluster}}
(
    node        LowCardinality(String),
    role        LowCardinality(String),
    endpoints   Array(String),
    updated_at  DateTime,
    version     UInt64
)
ENGINE = {{engine "nodes" "ReplacingMergeTree(version)"}}
PARTITION BY tuple()
ORDER BY node
SETTINGS index_granularity = 8192;
{{distributed "nodes" "cityHash64(node)"}}

-- engine_events: per-request lines of a prefill/decode engine (Receive and
-- Finish request logs, rejections, aborts, capacity checks, request-metrics
-- records). dp_rank/tp_rank are -1 when the line carried no rank.
CREATE TABLE IF NOT EXISTS {{table "engine_events"}} {{on_cluster}}
(
    ts                DateTime,
    ts_ns             UInt64,
    node              LowCardinality(String),
    role              LowCardinality(String),
    dp_rank           Int16,
    tp_rank           Int16,
    event             LowCardinality(String),
    rid               String,
    bootstrap_room    UInt64,
    bootstrap_host    String,
    bootstrap_port    UInt32,
    prompt_tokens     UInt64,
    completion_tokens UInt64,
    cached_tokens     UInt64,
    input_len         UInt64,
    limit_tokens      UInt64,
    finish_type       LowCardinality(String),
    finish_message    String,
    status_code       UInt16,
    e2e_latency_ms    Float64,
    line_id           UInt64,
    ingested_at       DateTime
)
ENGINE = {{engine "engine_events" "ReplacingMergeTree"}}
PARTITION BY toMonday(ts)
ORDER BY (node, ts, line_id)
SETTINGS index_granularity = 8192;
{{distributed "engine_events" "if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room))"}}

-- batch_stats: scheduler "Prefill batch" / "Decode batch" lines. Field names
-- drift across SGLang versions, so the typed columns hold the stable meanings
-- and field_keys/field_values keep every pair as logged.
CREATE TABLE IF NOT EXISTS {{table "batch_stats"}} {{on_cluster}}
(
    ts             DateTime,
    ts_ns          UInt64,
    node           LowCardinality(String),
    role           LowCardinality(String),
    dp_rank        Int16,
    tp_rank        Int16,
    kind           LowCardinality(String),
    new_seq        UInt32,
    new_token      UInt64,
    cached_token   UInt64,
    num_token      UInt64,
    token_usage    Float64,
    running_req    Int32,
    queue_req      Int32,
    bootstrap_req  Int32,
    inflight_req   Int32,
    prealloc_req   Int32,
    transfer_req   Int32,
    retracted_req  Int32,
    throughput     Float64,
    field_keys     Array(String),
    field_values   Array(String),
    line_id        UInt64,
    ingested_at    DateTime
)
ENGINE = {{engine "batch_stats" "ReplacingMergeTree"}}
PARTITION BY toMonday(ts)
ORDER BY (node, ts, line_id)
SETTINGS index_granularity = 8192;
{{distributed "batch_stats" "cityHash64(node)"}}

-- transfer_events: KV transfer, bootstrap and metadata problems from SGLang
-- (rid + room) and Mooncake glog (peer/NIC only: Mooncake never logs rooms).
-- other_room is the foreign room of a "Context corruption detected" line.
CREATE TABLE IF NOT EXISTS {{table "transfer_events"}} {{on_cluster}}
(
    ts             DateTime,
    ts_ns          UInt64,
    node           LowCardinality(String),
    role           LowCardinality(String),
    dp_rank        Int16,
    tp_rank        Int16,
    source         LowCardinality(String),
    event          LowCardinality(String),
    rid            String,
    bootstrap_room UInt64,
    other_room     UInt64,
    metadata_index Int64,
    reason         String,
    peer           String,
    nic            String,
    line_id        UInt64,
    ingested_at    DateTime
)
ENGINE = {{engine "transfer_events" "ReplacingMergeTree"}}
PARTITION BY toMonday(ts)
ORDER BY (node, ts, line_id)
SETTINGS index_granularity = 8192;
{{distributed "transfer_events" "if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room))"}}

-- gateway_responses: what each client was told (docs/formats.md, canonical
-- response schema). Tenant first: "everything for one customer" is a range.
CREATE TABLE IF NOT EXISTS {{table "gateway_responses"}} {{on_cluster}}
(
    ts                DateTime,
    ts_ns             UInt64,
    request_id        String,
    tenant            String,
    model             LowCardinality(String),
    status            UInt16,
    prompt_tokens     UInt64,
    completion_tokens UInt64,
    cached_tokens     UInt64,
    ttft_ms           Float64,
    duration_ms       Float64,
    prefill_endpoint  String,
    decode_endpoint   String,
    bootstrap_room    UInt64,
    prefill_rid       String,
    decode_rid        String,
    gateway           LowCardinality(String),
    line_id           UInt64,
    ingested_at       DateTime
)
ENGINE = {{engine "gateway_responses" "ReplacingMergeTree"}}
PARTITION BY toMonday(ts)
ORDER BY (tenant, ts, request_id)
SETTINGS index_granularity = 8192;
{{distributed "gateway_responses" "if(bootstrap_room = 0, cityHash64(tenant), cityHash64(bootstrap_room))"}}

-- metric_samples: Prometheus samples (files, scrapes, query_range imports).
-- series_id = FNV-64a of the sorted label set, so re-imports fold together.
CREATE TABLE IF NOT EXISTS {{table "metric_samples"}} {{on_cluster}}
(
    ts           DateTime,
    ts_ms        UInt64,
    node         LowCardinality(String),
    name         LowCardinality(String),
    series_id    UInt64,
    label_keys   Array(String),
    label_values Array(String),
    value        Float64,
    source       String,
    ingested_at  DateTime
)
ENGINE = {{engine "metric_samples" "ReplacingMergeTree"}}
PARTITION BY toMonday(ts)
ORDER BY (name, node, series_id, ts_ms)
SETTINGS index_granularity = 8192;
{{distributed "metric_samples" "cityHash64(node)"}}

-- page_events: optional page-level KV events (docs/formats.md). When present
-- they give exact lineage: who wrote the pages a request read.
CREATE TABLE IF NOT EXISTS {{table "page_events"}} {{on_cluster}}
(
    ts             DateTime,
    ts_ns          UInt64,
    node           LowCardinality(String),
    dp_rank        Int16,
    event          LowCardinality(String),
    rid            String,
    bootstrap_room UInt64,
    pages          Array(UInt32),
    line_id        UInt64,
    ingested_at    DateTime
)
ENGINE = {{engine "page_events" "ReplacingMergeTree"}}
PARTITION BY toMonday(ts)
ORDER BY (node, dp_rank, ts, line_id)
SETTINGS index_granularity = 8192;
{{distributed "page_events" "if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room))"}}

-- request_facts: one row per client request, linking gateway -> prefill ->
-- transfer -> decode. Built by the correlator; a rebuild with more evidence
-- gets a higher version and replaces the older row (same request_key).
CREATE TABLE IF NOT EXISTS {{table "request_facts"}} {{on_cluster}}
(
    request_key            String,
    ts                     DateTime,
    ts_ns                  UInt64,
    tenant                 String,
    model                  LowCardinality(String),
    gateway_request_id     String,
    bootstrap_room         UInt64,
    status                 UInt16,
    prompt_tokens          UInt64,
    completion_tokens      UInt64,
    cached_tokens          UInt64,
    ttft_ms                Float64,
    duration_ms            Float64,
    prefill_node           LowCardinality(String),
    prefill_rid            String,
    prefill_dp_rank        Int16,
    prefill_prompt_tokens  UInt64,
    prefill_finish_type    LowCardinality(String),
    prefill_rejected       UInt8,
    prefill_limit          UInt64,
    decode_node            LowCardinality(String),
    decode_rid             String,
    decode_dp_rank         Int16,
    decode_prompt_tokens   UInt64,
    decode_finish_type     LowCardinality(String),
    transfer_failed        UInt8,
    transfer_reason        String,
    corruption             UInt8,
    links                  LowCardinality(String),
    line_ids               Array(UInt64),
    version                UInt64
)
ENGINE = {{engine "request_facts" "ReplacingMergeTree(version)"}}
PARTITION BY toYYYYMM(ts)
ORDER BY (tenant, request_key)
SETTINGS index_granularity = 8192;
{{distributed "request_facts" "cityHash64(tenant)"}}

-- analyzer_runs: immutable record of every analyzer execution.
CREATE TABLE IF NOT EXISTS {{table "analyzer_runs"}} {{on_cluster}}
(
    run_id       String,
    analyzer     LowCardinality(String),
    version      String,
    params       String,
    window_from  DateTime,
    window_to    DateTime,
    watermark    DateTime,
    started_at   DateTime,
    finished_at  DateTime,
    status       LowCardinality(String),
    findings     UInt32,
    high         UInt32,
    error        String,
    trigger      LowCardinality(String),
    case_id      String
)
ENGINE = {{engine "analyzer_runs" "MergeTree"}}
PARTITION BY toYYYYMM(started_at)
ORDER BY (analyzer, started_at, run_id)
SETTINGS index_granularity = 8192;
{{distributed "analyzer_runs" "cityHash64(run_id)"}}

-- findings: what an analyzer run concluded, with the raw lines that prove it.
CREATE TABLE IF NOT EXISTS {{table "findings"}} {{on_cluster}}
(
    finding_id           String,
    run_id               String,
    analyzer             LowCardinality(String),
    analyzer_version     String,
    severity             LowCardinality(String),
    confidence           Float64,
    ts                   DateTime,
    first_ts             DateTime,
    last_ts              DateTime,
    request_key          String,
    gateway_request_id   String,
    tenant               String,
    bootstrap_room       UInt64,
    prefill_node         String,
    decode_node          String,
    decode_dp_rank       Int16,
    rids                 Array(String),
    title                String,
    explanation          String,
    group_key            String,
    foreign_tenants      Array(String),
    foreign_request_keys Array(String),
    evidence_line_ids    Array(UInt64),
    detail_keys          Array(String),
    detail_values        Array(String),
    created_at           DateTime
)
ENGINE = {{engine "findings" "MergeTree"}}
PARTITION BY toYYYYMM(ts)
ORDER BY (analyzer, ts, finding_id)
SETTINGS index_granularity = 8192;
{{distributed "findings" "cityHash64(finding_id)"}}

-- affected: the per-tenant notification list built from findings, stored per
-- reconstruction so an export can be reproduced exactly.
CREATE TABLE IF NOT EXISTS {{table "affected"}} {{on_cluster}}
(
    reconstruction_id String,
    case_id           String,
    tenant            String,
    affected_role     LowCardinality(String),
    requests          UInt64,
    first_ts          DateTime,
    last_ts           DateTime,
    models            Array(String),
    nodes             Array(String),
    confidence        Float64,
    request_keys      Array(String),
    finding_ids       Array(String),
    created_at        DateTime
)
ENGINE = {{engine "affected" "MergeTree"}}
PARTITION BY tuple()
ORDER BY (reconstruction_id, affected_role, tenant)
SETTINGS index_granularity = 8192;
{{distributed "affected" "cityHash64(reconstruction_id)"}}

-- cases: incidents under investigation. Each edit writes a new version.
CREATE TABLE IF NOT EXISTS {{table "cases"}} {{on_cluster}}
(
    case_id      String,
    name         String,
    window_from  DateTime,
    window_to    DateTime,
    filters      String,
    notes        String,
    status       LowCardinality(String),
    legal_hold   UInt8,
    created_by   String,
    created_at   DateTime,
    updated_at   DateTime,
    version      UInt64
)
ENGINE = {{engine "cases" "ReplacingMergeTree(version)"}}
PARTITION BY tuple()
ORDER BY case_id
SETTINGS index_granularity = 8192;
{{distributed "cases" "cityHash64(case_id)"}}

-- case_evidence: raw lines copied under a legal hold. Not partitioned by
-- time, so retention (which drops whole time partitions) never touches it.
CREATE TABLE IF NOT EXISTS {{table "case_evidence"}} {{on_cluster}}
(
    case_id      String,
    line_id      UInt64,
    ts           DateTime,
    ts_ns        UInt64,
    node         LowCardinality(String),
    role         LowCardinality(String),
    log_format   LowCardinality(String),
    source       String,
    file_digest  String,
    byte_offset  UInt64,
    line         String,
    held_at      DateTime,
    held_by      String
)
ENGINE = {{engine "case_evidence" "ReplacingMergeTree"}}
PARTITION BY tuple()
ORDER BY (case_id, ts, line_id)
SETTINGS index_granularity = 8192;
{{distributed "case_evidence" "cityHash64(case_id)"}}

-- exports: notification-list export jobs and their manifests.
CREATE TABLE IF NOT EXISTS {{table "exports"}} {{on_cluster}}
(
    export_id   String,
    case_id     String,
    requested_by String,
    created_at  DateTime,
    status      LowCardinality(String),
    rows        UInt64,
    manifest    String,
    error       String,
    version     UInt64
)
ENGINE = {{engine "exports" "ReplacingMergeTree(version)"}}
PARTITION BY tuple()
ORDER BY export_id
SETTINGS index_granularity = 8192;
{{distributed "exports" "cityHash64(export_id)"}}

-- ingest_sources: completeness accounting per source (file or push stream):
-- what was read, what parsed, the time span covered and the committed offset
-- a resumed ingest starts from.
CREATE TABLE IF NOT EXISTS {{table "ingest_sources"}} {{on_cluster}}
(
    source_id        String,
    path             String,
    node             LowCardinality(String),
    role             LowCardinality(String),
    log_format       LowCardinality(String),
    first_ts         DateTime,
    last_ts          DateTime,
    lines            UInt64,
    parsed           UInt64,
    unknown          UInt64,
    malformed        UInt64,
    bytes            UInt64,
    committed_offset UInt64,
    size             UInt64,
    complete         UInt8,
    updated_at       DateTime,
    version          UInt64
)
ENGINE = {{engine "ingest_sources" "ReplacingMergeTree(version)"}}
PARTITION BY tuple()
ORDER BY (node, source_id)
SETTINGS index_granularity = 8192;
{{distributed "ingest_sources" "cityHash64(node)"}}

-- audit_log: append-only record of every search, view and export.
CREATE TABLE IF NOT EXISTS {{table "audit_log"}} {{on_cluster}}
(
    ts           DateTime,
    ts_ns        UInt64,
    user         String,
    role         LowCardinality(String),
    action       LowCardinality(String),
    params       String,
    result_count Int64,
    status       UInt16,
    remote_addr  String
)
ENGINE = {{engine "audit_log" "MergeTree"}}
PARTITION BY toYYYYMM(ts)
ORDER BY (ts, user)
SETTINGS index_granularity = 8192;
{{distributed "audit_log" "cityHash64(user)"}}
