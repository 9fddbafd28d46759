-- metric_series: a Prometheus series' labels, once per series instead of on
-- every sample. metric_samples carried label_keys/label_values (and their
-- per-row client and server cost) on each of a series' thousands of
-- samples; writers now leave those two columns at their empty default and
-- write the labels here once per new series per run. Readers get a
-- sample's labels by joining on (series_id, node): series_id is FNV-64a of
-- the name and sorted labels, and node is part of the key because the same
-- label set can come from two nodes (scraped samples carry no instance
-- label). Rows written before this migration keep their own arrays, and
-- their series are copied here below, so both read the same way.
--
-- first_seen is the earliest sample time of the write that stored the row;
-- version (4294967295 - its unix seconds) makes the Replacing engine keep the
-- earliest of a series' rows. Like node_boots this table is not expired by
-- retention: it holds a row per series, not per sample.
CREATE TABLE IF NOT EXISTS {{table "metric_series"}} {{on_cluster}}
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
ENGINE = {{engine "metric_series" "ReplacingMergeTree(version)"}}
PARTITION BY tuple()
ORDER BY (series_id, node)
SETTINGS index_granularity = 1024;
{{distributed "metric_series" "cityHash64(node)"}}
INSERT INTO {{if dist "metric_series"}}{{dist "metric_series"}}{{else}}{{table "metric_series"}}{{end}} (series_id, node, name, label_keys, label_values, first_seen, version, ingested_at)
SELECT series_id, node, any(name), any(label_keys), any(label_values), min(ts), 4294967295 - toUInt32(min(ts)), now()
FROM {{if dist "metric_samples"}}{{dist "metric_samples"}}{{else}}{{table "metric_samples"}}{{end}}
GROUP BY series_id, node;
