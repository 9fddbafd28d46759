-- work_claims: how several kvtrail processes (ingest workers, analysis
-- workers), maybe on different machines, split the units of one job
-- without a coordinator of their own (internal/workclaim). Rows are only
-- appended: a worker claims a unit for an attempt, renews its lease with
-- more "claimed" rows, then writes "done" or "released". Who holds a unit
-- is decided by reading its rows (the earliest row of an attempt wins it),
-- so the table needs no transactions, which 18.16 lacks. Times are UInt64
-- nanoseconds (no DateTime64 in the base schema); day is only for
-- partitioning, so a finished job's months can be dropped whole. One job's
-- rows live on one shard (its sharding key), so a unit's rows are read
-- from one replica.
CREATE TABLE IF NOT EXISTS {{table "work_claims"}} {{on_cluster}}
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
ENGINE = {{engine "work_claims" "MergeTree"}}
PARTITION BY toYYYYMM(day)
ORDER BY (job, unit, attempt)
SETTINGS index_granularity = 1024;
{{distributed "work_claims" "cityHash64(job)"}}
