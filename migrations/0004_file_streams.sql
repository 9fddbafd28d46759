-- kvtrail schema, version 2: file identity by content, and correlation as a
-- checkpointed step of ingest. New tables only: 18.16 has no
-- ADD COLUMN IF NOT EXISTS, and a migration must be safe to run again.

-- file_checkpoints: the resume point of every file source, the authority a
-- rerun reads (ingest_sources keeps the same counters for completeness
-- reports). A source is node + path + stream; a stream is identified by its
-- node and the digest of its first block (head), so a file that grew, a
-- rotated copy and a .gz copy of the same bytes are one stream, and its
-- lines keep one line_id = FNV-64a(stream_id, byte_offset) whichever way
-- they arrive. prefix_digest is the SHA-256 of the first prefix_len bytes
-- (decompressed) that had been read when the checkpoint was saved: a later
-- file continues the stream only if its own first prefix_len bytes hash the
-- same. A file read while its last line was still being written ends
-- inside that line: it is stored and counted, and resume_offset (its start,
-- else committed_offset) is where a continuation reads from, so the whole
-- line replaces it (tail_status: its parse status). state is "partial" when the source could not be read to its end
-- (a truncated .gz); damage_offset is then the compressed byte offset
-- where reading failed.
CREATE TABLE IF NOT EXISTS {{table "file_checkpoints"}} {{on_cluster}}
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
ENGINE = {{engine "file_checkpoints" "ReplacingMergeTree(version)"}}
PARTITION BY tuple()
ORDER BY (node, source_id)
SETTINGS index_granularity = 8192;
{{distributed "file_checkpoints" "cityHash64(node)"}}

-- ingest_steps: steps of ingest that follow the sources, with how far they
-- got. step "correlate" links requests into request_facts; watermark is the
-- highest file_checkpoints version it has covered, so a rerun after a crash
-- finds the checkpoints saved since and correlates their span.
CREATE TABLE IF NOT EXISTS {{table "ingest_steps"}} {{on_cluster}}
(
    step        LowCardinality(String),
    watermark   UInt64,
    span_from   DateTime,
    span_to     DateTime,
    requests    UInt64,
    updated_at  DateTime,
    version     UInt64
)
ENGINE = {{engine "ingest_steps" "ReplacingMergeTree(version)"}}
PARTITION BY tuple()
ORDER BY step
SETTINGS index_granularity = 8192;
{{distributed "ingest_steps" "cityHash64(step)"}}
