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
{{if dist "affected"}}
ALTER TABLE {{dist "affected"}} {{on_cluster}} ADD COLUMN tier LowCardinality(String) DEFAULT '';
ALTER TABLE {{dist "affected"}} {{on_cluster}} ADD COLUMN counterparts Array(String);
ALTER TABLE {{dist "affected"}} {{on_cluster}} ADD COLUMN prompt_tokens Int64 DEFAULT 0;
ALTER TABLE {{dist "affected"}} {{on_cluster}} ADD COLUMN output_tokens Int64 DEFAULT 0;
ALTER TABLE {{dist "affected"}} {{on_cluster}} ADD COLUMN evidence_line_ids Array(UInt64);
{{end}}
