-- metric_samples.source as LowCardinality(String). Every sample carried its
-- source (the file path, scrape target or import name) as a plain string:
-- at bench ingest's scale 0.2, 689,452 samples of 152 distinct sources, 63
-- bytes each, 44 of the table's 63 uncompressed MB. Re-storing those
-- samples inside the server (INSERT ... SELECT, three runs) took 1.15-1.31
-- CPU-s with the String column and 0.41-0.50 s with LowCardinality, 0.36-
-- 0.47 s with no column at all (docs/performance.md, "Ingest throughput").
-- Readers see the same strings; writers send the same values.
--
-- The MODIFY is a mutation: existing parts are rewritten once, in the
-- background on modern ClickHouse and before the ALTER returns on 18.16.
-- metric_samples holds a row per sample, not per line, so this is small
-- beside raw_lines. A rerun after a crash finds the column converted and
-- converts nothing.
ALTER TABLE {{table "metric_samples"}} {{on_cluster}} MODIFY COLUMN source LowCardinality(String);
{{if dist "metric_samples"}}
{{if modern}}
ALTER TABLE {{dist "metric_samples"}} {{on_cluster}} MODIFY COLUMN source LowCardinality(String);
{{else}}
-- 18.16 refuses ALTER ... ON CLUSTER of the Distributed table on a
-- cluster whose shards are replicated (see 0013), so it is created again
-- over the local table, which has the new type on every replica by now.
DROP TABLE IF EXISTS {{dist "metric_samples"}} {{on_cluster}};
{{distributed "metric_samples" "cityHash64(node)"}}
{{end}}
{{end}}
