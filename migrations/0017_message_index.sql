-- msg_index in the keys of the tables a record's messages go to. Two
-- SGLang lines written without a newline between them (ranks sharing one
-- stream) are one record, split into its messages (docs/formats.md); each
-- message's row carries the record's line_id, the evidence reference. These
-- tables were ReplacingMergeTrees ordered by (node, ts, line_id), so two
-- messages of one record in the same second and table (two DP ranks'
-- "Decode batch" lines) had one sorting key and a merge kept one of them.
-- msg_index tells them apart: 0 for the record's primary message (the
-- first the parser understood), n for its n-th other message, in line
-- order. Rows written before have 0.
--
-- ADD COLUMN with MODIFY ORDER BY in one ALTER changes only metadata (on
-- 18.16 and modern servers alike): existing parts are already sorted by the
-- longer key, since the new column is the same in all of them. The column
-- has no DEFAULT expression because a key column added in the same ALTER
-- must not have one; its implicit default is 0. The primary index stays
-- (node, ts, line_id) [(node, dp_rank, ts, line_id) for page_events]. 18.16
-- has no ADD COLUMN IF NOT EXISTS: a rerun after a crash finds the column
-- there, which the migrator accepts (the ALTER's key change was made with
-- it).
{{if and (dist "engine_events") (not modern)}}
-- 18.16's ALTER ... ON CLUSTER refuses MODIFY ORDER BY ("Unsupported type
-- of ALTER query"), so on a cluster of 18.16 servers (kvtrail's own test
-- clusters; the modern rendering is for 22.1 and newer) the column is
-- added without joining the keys: rows carry it and every read tells the
-- messages apart, but a merge can still fold two messages of one line in
-- one second there (docs/formats.md).
ALTER TABLE {{table "engine_events"}} {{on_cluster}} ADD COLUMN msg_index UInt8 AFTER line_id;
ALTER TABLE {{table "batch_stats"}} {{on_cluster}} ADD COLUMN msg_index UInt8 AFTER line_id;
ALTER TABLE {{table "transfer_events"}} {{on_cluster}} ADD COLUMN msg_index UInt8 AFTER line_id;
ALTER TABLE {{table "page_events"}} {{on_cluster}} ADD COLUMN msg_index UInt8 AFTER line_id;
{{else}}
ALTER TABLE {{table "engine_events"}} {{on_cluster}} ADD COLUMN msg_index UInt8 AFTER line_id, MODIFY ORDER BY (node, ts, line_id, msg_index);
ALTER TABLE {{table "batch_stats"}} {{on_cluster}} ADD COLUMN msg_index UInt8 AFTER line_id, MODIFY ORDER BY (node, ts, line_id, msg_index);
ALTER TABLE {{table "transfer_events"}} {{on_cluster}} ADD COLUMN msg_index UInt8 AFTER line_id, MODIFY ORDER BY (node, ts, line_id, msg_index);
ALTER TABLE {{table "page_events"}} {{on_cluster}} ADD COLUMN msg_index UInt8 AFTER line_id, MODIFY ORDER BY (node, dp_rank, ts, line_id, msg_index);
{{end}}
{{if dist "engine_events"}}
{{if modern}}
ALTER TABLE {{dist "engine_events"}} {{on_cluster}} ADD COLUMN msg_index UInt8 AFTER line_id;
ALTER TABLE {{dist "batch_stats"}} {{on_cluster}} ADD COLUMN msg_index UInt8 AFTER line_id;
ALTER TABLE {{dist "transfer_events"}} {{on_cluster}} ADD COLUMN msg_index UInt8 AFTER line_id;
ALTER TABLE {{dist "page_events"}} {{on_cluster}} ADD COLUMN msg_index UInt8 AFTER line_id;
{{else}}
-- 18.16 refuses ALTER ... ON CLUSTER of the Distributed tables on a cluster
-- whose shards are replicated (see 0013): they hold no rows, so they are
-- created again over the local tables, which have the column by now.
DROP TABLE IF EXISTS {{dist "engine_events"}} {{on_cluster}};
{{distributed "engine_events" "if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room))"}}
DROP TABLE IF EXISTS {{dist "batch_stats"}} {{on_cluster}};
{{distributed "batch_stats" "cityHash64(node)"}}
DROP TABLE IF EXISTS {{dist "transfer_events"}} {{on_cluster}};
{{distributed "transfer_events" "if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room))"}}
DROP TABLE IF EXISTS {{dist "page_events"}} {{on_cluster}};
{{distributed "page_events" "if(bootstrap_room = 0, cityHash64(node), cityHash64(bootstrap_room))"}}
{{end}}
{{end}}
