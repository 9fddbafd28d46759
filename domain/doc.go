// Package domain holds kvtrail's vocabulary: the types every other package
// speaks when it talks about an incident — severities, findings and their
// windows, the two sides of the notification list (Role) and how certain an
// exposure is (Tier), and the kinds of error a caller can act on.
//
// It imports only the standard library, so ingest, analyze, web and cmd can
// all depend on it without depending on each other or on ClickHouse. Values
// that cross a boundary (the CLI's flags, the API's query parameters, the
// rows of an export) are parsed here, once, so one spelling holds
// everywhere.
package domain
