-- kvtrail schema: the allocator replay of an analysis job, shared among its
-- workers (analyze/replay_jobs.go). The worker that concludes a job writes
-- each replay it needs as an "ask" (the rooms asked about, JSON); every
-- worker of the job claims the ask's decode nodes (work_claims), replays
-- each claimed node and writes its "answer" (JSON) in one INSERT. The
-- concluding worker reads the answers back once every node is done. A node
-- redone after its worker died has answers from two workers; they are the
-- same replay, and the reader takes one.
CREATE TABLE IF NOT EXISTS {{table "replay_parts"}} {{on_cluster}}
(
    job         String,
    ask         String,
    unit        String,
    worker      String,
    kind        LowCardinality(String),
    data        String,
    saved_at    DateTime
)
ENGINE = {{engine "replay_parts" "MergeTree"}}
PARTITION BY toYYYYMM(saved_at)
ORDER BY (job, ask, kind, unit, worker)
SETTINGS index_granularity = 8192;
{{distributed "replay_parts" "cityHash64(job)"}}
