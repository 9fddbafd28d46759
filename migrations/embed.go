// Package migrations holds kvtrail's versioned ClickHouse schema as embedded,
// numbered SQL templates (NNNN_name.sql). internal/chstore renders and
// applies them; see docs/clickhouse.md for the template functions.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
