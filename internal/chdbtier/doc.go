// Package chdbtier is the modern-engine test tier: its tests (built with
// the "chdb" tag, run by scripts/test.sh after the main suite) execute
// kvtrail's schema and SQL on ClickHouse 26.7 in-process through
// internal/chdbstore, and compare analysis results with ClickHouse 18.16's.
// See docs/clickhouse.md.
package chdbtier
