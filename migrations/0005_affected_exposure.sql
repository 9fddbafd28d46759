-- affected: what the exposure reconstruction says about each row (issue 12):
-- the tier of an exposed row (confirmed | likely | possible), the tenants on
-- the other side, how many prompt and generated-output tokens of the tenant
-- sat in the leaked pages, and the evidence line ids. Each column is its own
-- ALTER so a re-run after a crash skips the columns already added.
ALTER TABLE {{table "affected"}} {{on_cluster}} ADD COLUMN tier LowCardinality(String) DEFAULT '';
ALTER TABLE {{table "affected"}} {{on_cluster}} ADD COLUMN counterparts Array(String);
ALTER TABLE {{table "affected"}} {{on_cluster}} ADD COLUMN prompt_tokens Int64 DEFAULT 0;
ALTER TABLE {{table "affected"}} {{on_cluster}} ADD COLUMN output_tokens Int64 DEFAULT 0;
ALTER TABLE {{table "affected"}} {{on_cluster}} ADD COLUMN evidence_line_ids Array(UInt64);
-- On a cluster the Distributed table takes its columns from affected_local
-- when it is created: 18.16 refuses ALTER ... ON CLUSTER of a
-- non-replicated table on internally replicated shards, so it is recreated
-- (it holds no data of its own).
{{if dist "affected"}}
DROP TABLE IF EXISTS {{dist "affected"}} {{on_cluster}};
{{end}}
{{distributed "affected" "cityHash64(reconstruction_id)"}}
