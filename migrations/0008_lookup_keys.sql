-- finding_keys: the keys the UI looks findings up by, so the finding page
-- and a request's findings are primary-key reads whatever the number of
-- findings (findings is sorted by (analyzer, ts, finding_id), which serves
-- the list, not a lookup by id or by request). One row per key of a stored
-- finding:
--   'f:' || finding_id                     the finding page
--   'r:' || gateway_request_id, and 'r:' || each foreign_request_keys
--                                          the findings of a request
--   'b:' || bootstrap_room (not 0)         the findings of a room
-- with the finding's analyzer and time (findings' sort key) and run (the
-- current-findings rule). A materialized view writes the rows as findings
-- are inserted, so no writer has to know about the table; findings already
-- stored are copied once below (on a cluster through the Distributed
-- tables, so every shard's findings are copied). Findings are never
-- expired, nor are these.
CREATE TABLE IF NOT EXISTS {{table "finding_keys"}} {{on_cluster}}
(
    key        String,
    finding_id String,
    analyzer   LowCardinality(String),
    ts         DateTime,
    run_id     String
)
ENGINE = {{engine "finding_keys" "ReplacingMergeTree()"}}
PARTITION BY tuple()
ORDER BY (key, finding_id, run_id)
SETTINGS index_granularity = 1024;
{{distributed "finding_keys" "cityHash64(key)"}}
CREATE MATERIALIZED VIEW IF NOT EXISTS {{table "finding_keys_mv"}} {{on_cluster}} TO {{table "finding_keys"}}
AS SELECT key, finding_id, analyzer, ts, run_id
FROM {{table "findings"}}
ARRAY JOIN arrayFilter(k -> k NOT IN ('r:', 'b:0'), arrayConcat([concat('f:', finding_id), concat('r:', gateway_request_id),
 concat('b:', toString(bootstrap_room))], arrayMap(x -> concat('r:', x), foreign_request_keys))) AS key;
INSERT INTO {{if dist "finding_keys"}}{{dist "finding_keys"}}{{else}}{{table "finding_keys"}}{{end}} (key, finding_id, analyzer, ts, run_id)
SELECT key, finding_id, analyzer, ts, run_id
FROM {{if dist "findings"}}{{dist "findings"}}{{else}}{{table "findings"}}{{end}}
ARRAY JOIN arrayFilter(k -> k NOT IN ('r:', 'b:0'), arrayConcat([concat('f:', finding_id), concat('r:', gateway_request_id),
 concat('b:', toString(bootstrap_room))], arrayMap(x -> concat('r:', x), foreign_request_keys))) AS key;
-- affected_keys: the same for the notification list. The request and
-- finding pages show the tenants on the other side of a request or finding
-- from the latest reconstruction; reading them from affected means reading
-- every row's request_keys and finding_ids arrays (millions of strings at
-- incident scale). One row per request key ('r:') and finding id ('f:') of
-- an affected row, with the row's role and tenant (affected's sort key).
CREATE TABLE IF NOT EXISTS {{table "affected_keys"}} {{on_cluster}}
(
    reconstruction_id String,
    key               String,
    affected_role     LowCardinality(String),
    tenant            String
)
ENGINE = {{engine "affected_keys" "ReplacingMergeTree()"}}
PARTITION BY tuple()
ORDER BY (reconstruction_id, key, affected_role, tenant)
SETTINGS index_granularity = 1024;
{{distributed "affected_keys" "cityHash64(reconstruction_id)"}}
CREATE MATERIALIZED VIEW IF NOT EXISTS {{table "affected_keys_mv"}} {{on_cluster}} TO {{table "affected_keys"}}
AS SELECT reconstruction_id, key, affected_role, tenant
FROM {{table "affected"}}
ARRAY JOIN arrayConcat(arrayMap(x -> concat('r:', x), request_keys), arrayMap(x -> concat('f:', x), finding_ids)) AS key;
INSERT INTO {{if dist "affected_keys"}}{{dist "affected_keys"}}{{else}}{{table "affected_keys"}}{{end}} (reconstruction_id, key, affected_role, tenant)
SELECT reconstruction_id, key, affected_role, tenant
FROM {{if dist "affected"}}{{dist "affected"}}{{else}}{{table "affected"}}{{end}}
ARRAY JOIN arrayConcat(arrayMap(x -> concat('r:', x), request_keys), arrayMap(x -> concat('f:', x), finding_ids)) AS key;
