-- fact_links: one row per link of requests into request_facts (what
-- `kvtrail ingest` does after its lines; analyze.Runner.Correlate). It
-- says which window was linked, under which request_facts version the
-- rows were saved, and what was saved: the number of requests the gateway
-- logged, their earliest and latest time (ns), and a digest of their rows
-- (domain.FactDigest). An analysis of a window the newest link covers,
-- with no line ingested since that link began, links the same rows; when
-- its digest of them agrees it reads the link's rows as its own instead
-- of writing a second copy of every request (analyze/adopt.go).
CREATE TABLE IF NOT EXISTS {{table "fact_links"}} {{on_cluster}}
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
ENGINE = {{engine "fact_links" "MergeTree"}}
ORDER BY version
SETTINGS index_granularity = 8192;
{{distributed "fact_links" "cityHash64(version)"}}
