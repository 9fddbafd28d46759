// Package promimport brings Prometheus metrics into kvtrail's metric_samples
// table from live systems, where ingest/parse handles metric *files*:
//
//   - Scraper polls SGLang /metrics endpoints (one node each) on an interval,
//     the way a Prometheus server would, for clusters that run no Prometheus
//     or whose retention is too short for a postmortem.
//   - Importer.ImportRange copies series out of a Prometheus server through
//     its HTTP API (/api/v1/query_range), for incidents that happened in the
//     past.
//
// Both write rows keyed (name, node, series_id, ts_ms) into a
// ReplacingMergeTree, so repeating an import or overlapping scrapes never
// duplicates samples once read with FINAL or GROUP BY.
package promimport
