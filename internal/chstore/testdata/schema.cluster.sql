-- 0001_schema.sql;

CREATE TABLE IF NOT EXISTS kvtrail.raw_lines_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/raw_lines_local', '{replica}')
PARTITION BY toMonday(ts)
ORDER BY (node, ts, line_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.raw_lines ON CLUSTER kvtrail_cluster AS kvtrail.raw_lines_local ENGINE = Distributed(kvtrail_cluster, kvtrail, raw_lines_local, if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room)));

CREATE TABLE IF NOT EXISTS kvtrail.id_index_local ON CLUSTER kvtrail_cluster
(
    id        String,
    id_kind   LowCardinality(String),
    node      LowCardinality(String),
    ts        DateTime,
    line_id   UInt64
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/id_index_local', '{replica}')
PARTITION BY toYYYYMM(ts)
ORDER BY (id, id_kind, node, ts, line_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.id_index ON CLUSTER kvtrail_cluster AS kvtrail.id_index_local ENGINE = Distributed(kvtrail_cluster, kvtrail, id_index_local, cityHash64(id));

CREATE TABLE IF NOT EXISTS kvtrail.node_boots_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/node_boots_local', '{replica}', facts)
PARTITION BY toYYYYMM(boot_ts)
ORDER BY (node, boot_ts, boot_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.node_boots ON CLUSTER kvtrail_cluster AS kvtrail.node_boots_local ENGINE = Distributed(kvtrail_cluster, kvtrail, node_boots_local, cityHash64(node));

CREATE TABLE IF NOT EXISTS kvtrail.nodes_local ON CLUSTER kvtrail_cluster
(
    node        LowCardinality(String),
    role        LowCardinality(String),
    endpoints   Array(String),
    updated_at  DateTime,
    version     UInt64
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/nodes_local', '{replica}', version)
PARTITION BY tuple()
ORDER BY node
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.nodes ON CLUSTER kvtrail_cluster AS kvtrail.nodes_local ENGINE = Distributed(kvtrail_cluster, kvtrail, nodes_local, cityHash64(node));

CREATE TABLE IF NOT EXISTS kvtrail.engine_events_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/engine_events_local', '{replica}')
PARTITION BY toMonday(ts)
ORDER BY (node, ts, line_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.engine_events ON CLUSTER kvtrail_cluster AS kvtrail.engine_events_local ENGINE = Distributed(kvtrail_cluster, kvtrail, engine_events_local, if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room)));

CREATE TABLE IF NOT EXISTS kvtrail.batch_stats_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/batch_stats_local', '{replica}')
PARTITION BY toMonday(ts)
ORDER BY (node, ts, line_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.batch_stats ON CLUSTER kvtrail_cluster AS kvtrail.batch_stats_local ENGINE = Distributed(kvtrail_cluster, kvtrail, batch_stats_local, cityHash64(node));

CREATE TABLE IF NOT EXISTS kvtrail.transfer_events_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/transfer_events_local', '{replica}')
PARTITION BY toMonday(ts)
ORDER BY (node, ts, line_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.transfer_events ON CLUSTER kvtrail_cluster AS kvtrail.transfer_events_local ENGINE = Distributed(kvtrail_cluster, kvtrail, transfer_events_local, if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room)));

CREATE TABLE IF NOT EXISTS kvtrail.gateway_responses_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/gateway_responses_local', '{replica}')
PARTITION BY toMonday(ts)
ORDER BY (tenant, ts, request_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.gateway_responses ON CLUSTER kvtrail_cluster AS kvtrail.gateway_responses_local ENGINE = Distributed(kvtrail_cluster, kvtrail, gateway_responses_local, if(bootstrap_room = 0, cityHash64(tenant), cityHash64(bootstrap_room)));

CREATE TABLE IF NOT EXISTS kvtrail.metric_samples_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/metric_samples_local', '{replica}')
PARTITION BY toMonday(ts)
ORDER BY (name, node, series_id, ts_ms)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.metric_samples ON CLUSTER kvtrail_cluster AS kvtrail.metric_samples_local ENGINE = Distributed(kvtrail_cluster, kvtrail, metric_samples_local, cityHash64(node));

CREATE TABLE IF NOT EXISTS kvtrail.page_events_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/page_events_local', '{replica}')
PARTITION BY toMonday(ts)
ORDER BY (node, dp_rank, ts, line_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.page_events ON CLUSTER kvtrail_cluster AS kvtrail.page_events_local ENGINE = Distributed(kvtrail_cluster, kvtrail, page_events_local, if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room)));

CREATE TABLE IF NOT EXISTS kvtrail.request_facts_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/request_facts_local', '{replica}', version)
PARTITION BY toYYYYMM(ts)
ORDER BY (tenant, request_key)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.request_facts ON CLUSTER kvtrail_cluster AS kvtrail.request_facts_local ENGINE = Distributed(kvtrail_cluster, kvtrail, request_facts_local, cityHash64(tenant));

CREATE TABLE IF NOT EXISTS kvtrail.analyzer_runs_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/kvtrail/analyzer_runs_local', '{replica}')
PARTITION BY toYYYYMM(started_at)
ORDER BY (analyzer, started_at, run_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.analyzer_runs ON CLUSTER kvtrail_cluster AS kvtrail.analyzer_runs_local ENGINE = Distributed(kvtrail_cluster, kvtrail, analyzer_runs_local, cityHash64(run_id));

CREATE TABLE IF NOT EXISTS kvtrail.findings_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/kvtrail/findings_local', '{replica}')
PARTITION BY toYYYYMM(ts)
ORDER BY (analyzer, ts, finding_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.findings ON CLUSTER kvtrail_cluster AS kvtrail.findings_local ENGINE = Distributed(kvtrail_cluster, kvtrail, findings_local, cityHash64(finding_id));

CREATE TABLE IF NOT EXISTS kvtrail.affected_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/kvtrail/affected_local', '{replica}')
PARTITION BY tuple()
ORDER BY (reconstruction_id, affected_role, tenant)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.affected ON CLUSTER kvtrail_cluster AS kvtrail.affected_local ENGINE = Distributed(kvtrail_cluster, kvtrail, affected_local, cityHash64(reconstruction_id));

CREATE TABLE IF NOT EXISTS kvtrail.cases_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/cases_local', '{replica}', version)
PARTITION BY tuple()
ORDER BY case_id
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.cases ON CLUSTER kvtrail_cluster AS kvtrail.cases_local ENGINE = Distributed(kvtrail_cluster, kvtrail, cases_local, cityHash64(case_id));

CREATE TABLE IF NOT EXISTS kvtrail.case_evidence_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/case_evidence_local', '{replica}')
PARTITION BY tuple()
ORDER BY (case_id, ts, line_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.case_evidence ON CLUSTER kvtrail_cluster AS kvtrail.case_evidence_local ENGINE = Distributed(kvtrail_cluster, kvtrail, case_evidence_local, cityHash64(case_id));

CREATE TABLE IF NOT EXISTS kvtrail.exports_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/exports_local', '{replica}', version)
PARTITION BY tuple()
ORDER BY export_id
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.exports ON CLUSTER kvtrail_cluster AS kvtrail.exports_local ENGINE = Distributed(kvtrail_cluster, kvtrail, exports_local, cityHash64(export_id));

CREATE TABLE IF NOT EXISTS kvtrail.ingest_sources_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/ingest_sources_local', '{replica}', version)
PARTITION BY tuple()
ORDER BY (node, source_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.ingest_sources ON CLUSTER kvtrail_cluster AS kvtrail.ingest_sources_local ENGINE = Distributed(kvtrail_cluster, kvtrail, ingest_sources_local, cityHash64(node));

CREATE TABLE IF NOT EXISTS kvtrail.audit_log_local ON CLUSTER kvtrail_cluster
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
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/kvtrail/audit_log_local', '{replica}')
PARTITION BY toYYYYMM(ts)
ORDER BY (ts, user)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.audit_log ON CLUSTER kvtrail_cluster AS kvtrail.audit_log_local ENGINE = Distributed(kvtrail_cluster, kvtrail, audit_log_local, cityHash64(user));

-- 0002_session_revocations.sql;

CREATE TABLE IF NOT EXISTS kvtrail.session_revocations_local ON CLUSTER kvtrail_cluster
(
    session_id  String,
    user        String,
    revoked_at  DateTime,
    expires     DateTime
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/session_revocations_local', '{replica}')
PARTITION BY toYYYYMM(expires)
ORDER BY session_id
SETTINGS index_granularity = 1024;

CREATE TABLE IF NOT EXISTS kvtrail.session_revocations ON CLUSTER kvtrail_cluster AS kvtrail.session_revocations_local ENGINE = Distributed(kvtrail_cluster, kvtrail, session_revocations_local, cityHash64(session_id));

-- 0003_probes.sql;

CREATE TABLE IF NOT EXISTS kvtrail.probes_local ON CLUSTER kvtrail_cluster
(
    ts                DateTime,
    ts_ns             UInt64,
    probe_id          String,
    round_id          String,
    identity          LowCardinality(String),
    endpoint          String,
    model             String,
    kind              LowCardinality(String),
    stream            UInt8,
    marker            String,
    target_tokens     UInt64,
    threshold_tokens  UInt64,
    threshold_node    String,
    prompt_tokens     UInt64,
    completion_tokens UInt64,
    http_status       UInt16,
    latency_ms        UInt32,
    finish_reason     String,
    response_text     String,
    error_text        String,
    foreign_markers   Array(String),
    foreign_probe_ids Array(String),
    verdict           LowCardinality(String),
    ingested_at       DateTime
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/probes_local', '{replica}')
PARTITION BY toMonday(ts)
ORDER BY (ts, probe_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.probes ON CLUSTER kvtrail_cluster AS kvtrail.probes_local ENGINE = Distributed(kvtrail_cluster, kvtrail, probes_local, cityHash64(probe_id));

-- 0004_file_streams.sql;

CREATE TABLE IF NOT EXISTS kvtrail.file_checkpoints_local ON CLUSTER kvtrail_cluster
(
    source_id        String,
    node             LowCardinality(String),
    path             String,
    stream_id        String,
    head_len         UInt32,
    head_digest      String,
    prefix_len       UInt64,
    prefix_digest    String,
    log_format       LowCardinality(String),
    first_ts         DateTime,
    last_ts          DateTime,
    lines            UInt64,
    parsed           UInt64,
    unknown          UInt64,
    malformed        UInt64,
    committed_offset UInt64,
    resume_offset    UInt64,
    tail_status      LowCardinality(String),
    size             UInt64,
    complete         UInt8,
    state            LowCardinality(String),
    damage_offset    UInt64,
    updated_at       DateTime,
    version          UInt64
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/file_checkpoints_local', '{replica}', version)
PARTITION BY tuple()
ORDER BY (node, source_id)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.file_checkpoints ON CLUSTER kvtrail_cluster AS kvtrail.file_checkpoints_local ENGINE = Distributed(kvtrail_cluster, kvtrail, file_checkpoints_local, cityHash64(node));

CREATE TABLE IF NOT EXISTS kvtrail.ingest_steps_local ON CLUSTER kvtrail_cluster
(
    step        LowCardinality(String),
    watermark   UInt64,
    span_from   DateTime,
    span_to     DateTime,
    requests    UInt64,
    updated_at  DateTime,
    version     UInt64
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/ingest_steps_local', '{replica}', version)
PARTITION BY tuple()
ORDER BY step
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.ingest_steps ON CLUSTER kvtrail_cluster AS kvtrail.ingest_steps_local ENGINE = Distributed(kvtrail_cluster, kvtrail, ingest_steps_local, cityHash64(step));

-- 0005_affected_exposure.sql;

ALTER TABLE kvtrail.affected_local ON CLUSTER kvtrail_cluster ADD COLUMN tier LowCardinality(String) DEFAULT '';

ALTER TABLE kvtrail.affected_local ON CLUSTER kvtrail_cluster ADD COLUMN counterparts Array(String);

ALTER TABLE kvtrail.affected_local ON CLUSTER kvtrail_cluster ADD COLUMN prompt_tokens Int64 DEFAULT 0;

ALTER TABLE kvtrail.affected_local ON CLUSTER kvtrail_cluster ADD COLUMN output_tokens Int64 DEFAULT 0;

ALTER TABLE kvtrail.affected_local ON CLUSTER kvtrail_cluster ADD COLUMN evidence_line_ids Array(UInt64);

DROP TABLE IF EXISTS kvtrail.affected ON CLUSTER kvtrail_cluster;

CREATE TABLE IF NOT EXISTS kvtrail.affected ON CLUSTER kvtrail_cluster AS kvtrail.affected_local ENGINE = Distributed(kvtrail_cluster, kvtrail, affected_local, cityHash64(reconstruction_id));

-- 0006_modern_skip_indexes.sql;

-- 0007_modern_event_time.sql;

-- 0008_lookup_keys.sql;

CREATE TABLE IF NOT EXISTS kvtrail.finding_keys_local ON CLUSTER kvtrail_cluster
(
    key        String,
    finding_id String,
    analyzer   LowCardinality(String),
    ts         DateTime,
    run_id     String
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/finding_keys_local', '{replica}')
PARTITION BY tuple()
ORDER BY (key, finding_id, run_id)
SETTINGS index_granularity = 1024;

CREATE TABLE IF NOT EXISTS kvtrail.finding_keys ON CLUSTER kvtrail_cluster AS kvtrail.finding_keys_local ENGINE = Distributed(kvtrail_cluster, kvtrail, finding_keys_local, cityHash64(key));

CREATE MATERIALIZED VIEW IF NOT EXISTS kvtrail.finding_keys_mv_local ON CLUSTER kvtrail_cluster TO kvtrail.finding_keys_local
AS SELECT key, finding_id, analyzer, ts, run_id
FROM kvtrail.findings_local
ARRAY JOIN arrayFilter(k -> k NOT IN ('r:', 'b:0'), arrayConcat([concat('f:', finding_id), concat('r:', gateway_request_id),
 concat('b:', toString(bootstrap_room))], arrayMap(x -> concat('r:', x), foreign_request_keys))) AS key;

INSERT INTO kvtrail.finding_keys (key, finding_id, analyzer, ts, run_id)
SELECT key, finding_id, analyzer, ts, run_id
FROM kvtrail.findings
ARRAY JOIN arrayFilter(k -> k NOT IN ('r:', 'b:0'), arrayConcat([concat('f:', finding_id), concat('r:', gateway_request_id),
 concat('b:', toString(bootstrap_room))], arrayMap(x -> concat('r:', x), foreign_request_keys))) AS key;

CREATE TABLE IF NOT EXISTS kvtrail.affected_keys_local ON CLUSTER kvtrail_cluster
(
    reconstruction_id String,
    key               String,
    affected_role     LowCardinality(String),
    tenant            String
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/affected_keys_local', '{replica}')
PARTITION BY tuple()
ORDER BY (reconstruction_id, key, affected_role, tenant)
SETTINGS index_granularity = 1024;

CREATE TABLE IF NOT EXISTS kvtrail.affected_keys ON CLUSTER kvtrail_cluster AS kvtrail.affected_keys_local ENGINE = Distributed(kvtrail_cluster, kvtrail, affected_keys_local, cityHash64(reconstruction_id));

CREATE MATERIALIZED VIEW IF NOT EXISTS kvtrail.affected_keys_mv_local ON CLUSTER kvtrail_cluster TO kvtrail.affected_keys_local
AS SELECT reconstruction_id, key, affected_role, tenant
FROM kvtrail.affected_local
ARRAY JOIN arrayConcat(arrayMap(x -> concat('r:', x), request_keys), arrayMap(x -> concat('f:', x), finding_ids)) AS key;

INSERT INTO kvtrail.affected_keys (reconstruction_id, key, affected_role, tenant)
SELECT reconstruction_id, key, affected_role, tenant
FROM kvtrail.affected
ARRAY JOIN arrayConcat(arrayMap(x -> concat('r:', x), request_keys), arrayMap(x -> concat('f:', x), finding_ids)) AS key;

-- 0009_work_claims.sql;

CREATE TABLE IF NOT EXISTS kvtrail.work_claims_local ON CLUSTER kvtrail_cluster
(
    job            String,
    unit           String,
    attempt        UInt32,
    worker         String,
    state          String,
    at_ns          UInt64,
    lease_until_ns UInt64,
    day            DateTime
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/kvtrail/work_claims_local', '{replica}')
PARTITION BY toYYYYMM(day)
ORDER BY (job, unit, attempt)
SETTINGS index_granularity = 1024;

CREATE TABLE IF NOT EXISTS kvtrail.work_claims ON CLUSTER kvtrail_cluster AS kvtrail.work_claims_local ENGINE = Distributed(kvtrail_cluster, kvtrail, work_claims_local, cityHash64(job));

-- 0010_metric_series.sql;

CREATE TABLE IF NOT EXISTS kvtrail.metric_series_local ON CLUSTER kvtrail_cluster
(
    series_id    UInt64,
    node         LowCardinality(String),
    name         LowCardinality(String),
    label_keys   Array(String),
    label_values Array(String),
    first_seen   DateTime,
    version      UInt32,
    ingested_at  DateTime
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/metric_series_local', '{replica}', version)
PARTITION BY tuple()
ORDER BY (series_id, node)
SETTINGS index_granularity = 1024;

CREATE TABLE IF NOT EXISTS kvtrail.metric_series ON CLUSTER kvtrail_cluster AS kvtrail.metric_series_local ENGINE = Distributed(kvtrail_cluster, kvtrail, metric_series_local, cityHash64(node));

INSERT INTO kvtrail.metric_series (series_id, node, name, label_keys, label_values, first_seen, version, ingested_at)
SELECT series_id, node, any(name), any(label_keys), any(label_values), min(ts), 4294967295 - toUInt32(min(ts)), now()
FROM kvtrail.metric_samples
GROUP BY series_id, node;

-- 0011_analysis_slices.sql;

CREATE TABLE IF NOT EXISTS kvtrail.analysis_slices_local ON CLUSTER kvtrail_cluster
(
    job         String,
    slice       UInt32,
    worker      String,
    analyzer    LowCardinality(String),
    findings    String,
    state       String,
    error       String,
    saved_at    DateTime
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/kvtrail/analysis_slices_local', '{replica}')
PARTITION BY toYYYYMM(saved_at)
ORDER BY (job, slice, worker, analyzer)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.analysis_slices ON CLUSTER kvtrail_cluster AS kvtrail.analysis_slices_local ENGINE = Distributed(kvtrail_cluster, kvtrail, analysis_slices_local, cityHash64(job));

-- 0012_affected_keys_written.sql;

DROP TABLE IF EXISTS kvtrail.affected_keys_mv_local ON CLUSTER kvtrail_cluster;

-- 0013_line_sources.sql;

CREATE TABLE IF NOT EXISTS kvtrail.line_sources_local ON CLUSTER kvtrail_cluster
(
    source_ref   UInt64,
    node         LowCardinality(String),
    source       String,
    file_digest  String,
    first_seen   DateTime,
    version      UInt32
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/kvtrail/line_sources_local', '{replica}', version)
PARTITION BY tuple()
ORDER BY source_ref
SETTINGS index_granularity = 1024;

CREATE TABLE IF NOT EXISTS kvtrail.line_sources ON CLUSTER kvtrail_cluster AS kvtrail.line_sources_local ENGINE = Distributed(kvtrail_cluster, kvtrail, line_sources_local, cityHash64(source_ref));

ALTER TABLE kvtrail.raw_lines_local ON CLUSTER kvtrail_cluster ADD COLUMN source_ref UInt64 DEFAULT 0 AFTER file_digest;

DROP TABLE IF EXISTS kvtrail.raw_lines ON CLUSTER kvtrail_cluster;

CREATE TABLE IF NOT EXISTS kvtrail.raw_lines ON CLUSTER kvtrail_cluster AS kvtrail.raw_lines_local ENGINE = Distributed(kvtrail_cluster, kvtrail, raw_lines_local, if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room)));

-- 0014_replay_parts.sql;

CREATE TABLE IF NOT EXISTS kvtrail.replay_parts_local ON CLUSTER kvtrail_cluster
(
    job         String,
    ask         String,
    unit        String,
    worker      String,
    kind        LowCardinality(String),
    data        String,
    saved_at    DateTime
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/kvtrail/replay_parts_local', '{replica}')
PARTITION BY toYYYYMM(saved_at)
ORDER BY (job, ask, kind, unit, worker)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.replay_parts ON CLUSTER kvtrail_cluster AS kvtrail.replay_parts_local ENGINE = Distributed(kvtrail_cluster, kvtrail, replay_parts_local, cityHash64(job));

-- 0015_finding_keys_written.sql;

DROP TABLE IF EXISTS kvtrail.finding_keys_mv_local ON CLUSTER kvtrail_cluster;

-- 0016_metric_sample_source_lc.sql;

ALTER TABLE kvtrail.metric_samples_local ON CLUSTER kvtrail_cluster MODIFY COLUMN source LowCardinality(String);

DROP TABLE IF EXISTS kvtrail.metric_samples ON CLUSTER kvtrail_cluster;

CREATE TABLE IF NOT EXISTS kvtrail.metric_samples ON CLUSTER kvtrail_cluster AS kvtrail.metric_samples_local ENGINE = Distributed(kvtrail_cluster, kvtrail, metric_samples_local, cityHash64(node));

-- 0017_message_index.sql;

ALTER TABLE kvtrail.engine_events_local ON CLUSTER kvtrail_cluster ADD COLUMN msg_index UInt8 AFTER line_id;

ALTER TABLE kvtrail.batch_stats_local ON CLUSTER kvtrail_cluster ADD COLUMN msg_index UInt8 AFTER line_id;

ALTER TABLE kvtrail.transfer_events_local ON CLUSTER kvtrail_cluster ADD COLUMN msg_index UInt8 AFTER line_id;

ALTER TABLE kvtrail.page_events_local ON CLUSTER kvtrail_cluster ADD COLUMN msg_index UInt8 AFTER line_id;

DROP TABLE IF EXISTS kvtrail.engine_events ON CLUSTER kvtrail_cluster;

CREATE TABLE IF NOT EXISTS kvtrail.engine_events ON CLUSTER kvtrail_cluster AS kvtrail.engine_events_local ENGINE = Distributed(kvtrail_cluster, kvtrail, engine_events_local, if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room)));

DROP TABLE IF EXISTS kvtrail.batch_stats ON CLUSTER kvtrail_cluster;

CREATE TABLE IF NOT EXISTS kvtrail.batch_stats ON CLUSTER kvtrail_cluster AS kvtrail.batch_stats_local ENGINE = Distributed(kvtrail_cluster, kvtrail, batch_stats_local, cityHash64(node));

DROP TABLE IF EXISTS kvtrail.transfer_events ON CLUSTER kvtrail_cluster;

CREATE TABLE IF NOT EXISTS kvtrail.transfer_events ON CLUSTER kvtrail_cluster AS kvtrail.transfer_events_local ENGINE = Distributed(kvtrail_cluster, kvtrail, transfer_events_local, if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room)));

DROP TABLE IF EXISTS kvtrail.page_events ON CLUSTER kvtrail_cluster;

CREATE TABLE IF NOT EXISTS kvtrail.page_events ON CLUSTER kvtrail_cluster AS kvtrail.page_events_local ENGINE = Distributed(kvtrail_cluster, kvtrail, page_events_local, if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room)));

-- 0018_fact_links.sql;

CREATE TABLE IF NOT EXISTS kvtrail.fact_links_local ON CLUSTER kvtrail_cluster
(
    version         UInt64,
    window_from_ns  UInt64,
    window_to_ns    UInt64,
    first_ts_ns     UInt64,
    last_ts_ns      UInt64,
    facts           UInt64,
    digest_lo       UInt64,
    digest_hi       UInt64,
    linked_at       DateTime
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/kvtrail/fact_links_local', '{replica}')
ORDER BY version
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.fact_links ON CLUSTER kvtrail_cluster AS kvtrail.fact_links_local ENGINE = Distributed(kvtrail_cluster, kvtrail, fact_links_local, cityHash64(version));

-- 0019_affected_stage.sql;

CREATE TABLE IF NOT EXISTS kvtrail.affected_stage_local ON CLUSTER kvtrail_cluster
(
    build_id       String,
    affected_role  String,
    tenant         String,
    kind           String,
    value          String,
    line_id        UInt64,
    tier           String,
    first_ts       DateTime,
    last_ts        DateTime,
    confidence     Float64,
    prompt_tokens  Int64,
    output_tokens  Int64
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/kvtrail/affected_stage_local', '{replica}')
PARTITION BY build_id
ORDER BY build_id
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS kvtrail.affected_stage ON CLUSTER kvtrail_cluster AS kvtrail.affected_stage_local ENGINE = Distributed(kvtrail_cluster, kvtrail, affected_stage_local, cityHash64(build_id));
