-- line_sources: a raw line's source by reference. raw_lines carried its
-- source (file path, or push stream labels) and file_digest (stream id) as
-- strings on every line: 29% of the table's uncompressed bytes, for a few
-- hundred distinct values. Writers now store each source once here and
-- give its lines source_ref, leaving their source and file_digest at the
-- empty default. source_ref is FNV-64a of (node, source, file_digest)
-- (ingest.SourceRef), so every ingest process computes the same key for a
-- source and the Replacing engine folds their rows; a source's row is
-- written in the commit window of its lines, whose checkpoints are saved
-- only once it is stored.
--
-- Rows stored before this migration keep their strings and source_ref 0:
-- they are not rewritten (a mutation would rewrite every part of the
-- table), and readers take a row's own strings when source_ref is 0 and
-- its line_sources row otherwise (internal/chstore/line_sources.go), so
-- both read the same way. Unlike metric_series (0010) nothing is copied
-- here: old rows do not point to this table.
--
-- first_seen is when kvtrail first wrote the row; version (4294967295 -
-- its unix seconds) makes the Replacing engine keep the earliest. Like
-- metric_series this table is not expired by retention: it holds a row
-- per source, not per line.
CREATE TABLE IF NOT EXISTS {{table "line_sources"}} {{on_cluster}}
(
    source_ref   UInt64,
    node         LowCardinality(String),
    source       String,
    file_digest  String,
    first_seen   DateTime,
    version      UInt32
)
ENGINE = {{engine "line_sources" "ReplacingMergeTree(version)"}}
PARTITION BY tuple()
ORDER BY source_ref
SETTINGS index_granularity = 1024;
{{distributed "line_sources" "cityHash64(source_ref)"}}
-- The column on raw_lines, and on a cluster on its Distributed table too
-- (inserts go through it and must be able to name the column). 18.16 has
-- no ADD COLUMN IF NOT EXISTS: a rerun of this migration after a crash
-- finds the column there, which the migrator accepts.
ALTER TABLE {{table "raw_lines"}} {{on_cluster}} ADD COLUMN source_ref UInt64 DEFAULT 0 AFTER file_digest;
{{if dist "raw_lines"}}
{{if modern}}
ALTER TABLE {{dist "raw_lines"}} {{on_cluster}} ADD COLUMN source_ref UInt64 DEFAULT 0 AFTER file_digest;
{{else}}
-- 18.16 refuses ALTER ... ON CLUSTER of a table that is not replicated
-- on a cluster whose shards are ("Table raw_lines isn't replicated, but
-- shard #1 is replicated"), so there the Distributed table, which holds
-- no rows (kvtrail inserts with insert_distributed_sync), is created
-- again over the local table, which has the column on every replica by
-- now (18.16 waits for the replicas to apply a replicated ALTER). An
-- older kvtrail inserting at that moment gets an error and retries.
DROP TABLE IF EXISTS {{dist "raw_lines"}} {{on_cluster}};
{{distributed "raw_lines" "if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room))"}}
{{end}}
{{end}}
