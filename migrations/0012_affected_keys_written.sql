-- kvtrail schema: affected_keys is written by kvtrail with each
-- reconstruction (SaveAffected) instead of by a materialized view. On
-- ClickHouse 18.16 a view's ARRAY JOIN copies every column of the inserted
-- block for each key, evidence_line_ids included: at incident scale (tens
-- of thousands of keys and of evidence lines per tenant row) one insert
-- asked the server for 32 GiB and failed. Rows already copied stay.
DROP TABLE IF EXISTS {{table "affected_keys_mv"}} {{on_cluster}};
