-- Skip indexes for the lookups the UI and the CLI make by id, and for
-- searching evidence text. Modern servers only: 18.16 has no data-skipping
-- indexes (its grammar rejects INDEX), so there this migration renders to
-- nothing and is recorded as applied. A server upgraded from 18.16 later
-- therefore does not get them from this migration (docs/clickhouse.md).
--
-- The sorting keys serve time and node scans; these serve the point lookups
-- that the keys do not lead with:
--   raw_lines.line_id        evidence lines of a finding or request (key: node, ts, line_id)
--   raw_lines.rid / room     a request's lines across nodes
--   raw_lines.line           token search in evidence text (hasToken, LIKE '%word%')
--   engine/transfer rid/room one request's engine and transfer events
--   gateway_responses.request_id, request_facts.request_key / gateway_request_id,
--   findings.finding_id / request_key: the request and finding pages.
-- ADD INDEX applies to parts written from now on; MATERIALIZE INDEX builds
-- it for existing parts (a background mutation).
{{if modern}}
ALTER TABLE {{table "raw_lines"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_line_id line_id TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "raw_lines"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_rid rid TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "raw_lines"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_room bootstrap_room TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "raw_lines"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_line_tokens line TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 4;
ALTER TABLE {{table "engine_events"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_rid rid TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "engine_events"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_room bootstrap_room TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "transfer_events"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_rid rid TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "transfer_events"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_room bootstrap_room TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "gateway_responses"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_request_id request_id TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "request_facts"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_request_key request_key TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "request_facts"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_gateway_request_id gateway_request_id TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "findings"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_finding_id finding_id TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "findings"}} {{on_cluster}} ADD INDEX IF NOT EXISTS idx_request_key request_key TYPE bloom_filter(0.01) GRANULARITY 4;
ALTER TABLE {{table "raw_lines"}} {{on_cluster}} MATERIALIZE INDEX idx_line_id;
ALTER TABLE {{table "raw_lines"}} {{on_cluster}} MATERIALIZE INDEX idx_line_tokens;
{{end}}
