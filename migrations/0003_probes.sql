-- probes: one row per canary probe request (kvtrail probe, or serve with
-- probes.enabled): what was sent to the OpenAI-compatible endpoint, what came
-- back and the verdict. The prompt is kvtrail's own filler plus a marker;
-- response_text keeps at most 2 KiB of the answer as evidence. A leak row
-- names the probes whose markers the answer carried (foreign_probe_ids).
-- The canary_probe analyzer turns leak and over-limit rows into findings.
CREATE TABLE IF NOT EXISTS {{table "probes"}} {{on_cluster}}
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
ENGINE = {{engine "probes" "ReplacingMergeTree"}}
PARTITION BY toMonday(ts)
ORDER BY (ts, probe_id)
SETTINGS index_granularity = 8192;
{{distributed "probes" "cityHash64(probe_id)"}}
