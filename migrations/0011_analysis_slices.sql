-- kvtrail schema: analysis workers (analyze/worker.go). A window read in
-- slices can be analyzed by several `kvtrail analyze --worker` processes:
-- each claims slices (work_claims) and writes, in one INSERT per slice,
-- what each analyzer found there and the sums it carries to the window's
-- end (state, JSON). The worker that finishes the job reads every slice's
-- rows back, in slice order, and concludes as a single process would. A
-- slice redone after its worker died has rows from two workers; the reader
-- takes one worker's (the rows of one INSERT are complete together).
CREATE TABLE IF NOT EXISTS {{table "analysis_slices"}} {{on_cluster}}
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
ENGINE = {{engine "analysis_slices" "MergeTree"}}
PARTITION BY toYYYYMM(saved_at)
ORDER BY (job, slice, worker, analyzer)
SETTINGS index_granularity = 8192;
{{distributed "analysis_slices" "cityHash64(job)"}}
