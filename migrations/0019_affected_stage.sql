-- affected_stage: a notification list while a reconstruction folds it
-- (analyze/affected.go). The reconstruction sends each row's request keys
-- and evidence lines here as it finds them, then its rows' other columns,
-- and the server folds them into the affected rows and their
-- affected_keys (INSERT ... SELECT ... GROUP BY affected_role, tenant):
-- kvtrail never holds a whole list, which grows with the exposed requests
-- (868,775 request keys at incident-2026 scale 100, about 1 GB of Go
-- memory at 100M requests). One partition per build, dropped once the
-- list is stored. kind says what a row carries: 'h' a list row's scalars
-- (tier, times, confidence, tokens), 'r' a request key, 'f' a finding
-- id, 'm' a model, 'n' a node and 'c' a counterpart (in value), 'e' an
-- evidence line (in line_id). Ordered by the build alone: nothing reads
-- the stage but the fold's GROUP BY, and an insert sorted by all columns
-- took the server 256 ms a 100,000 rows.
CREATE TABLE IF NOT EXISTS {{table "affected_stage"}} {{on_cluster}}
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
ENGINE = {{engine "affected_stage" "MergeTree"}}
PARTITION BY build_id
ORDER BY build_id
SETTINGS index_granularity = 8192;
{{distributed "affected_stage" "cityHash64(build_id)"}}
