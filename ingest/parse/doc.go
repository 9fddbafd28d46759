// Package parse turns raw SGLang, Mooncake, sgl-model-gateway, Prometheus
// and kvtrail page-event logs into typed records for the ingest pipeline.
//
// The pipeline reads a source with a Reader, which splits the byte stream
// into Records (exact byte offsets, 1-based line numbers, Python tracebacks
// folded into the record they belong to), and hands every Record to the
// Parser for the source's Format (see Detect and New). A Parser never fails
// a line: anything it cannot read comes back as StatusUnknown or
// StatusMalformed with the raw bytes untouched, because the raw line is the
// evidence (migrations/0001_schema.sql, raw_lines).
//
// Every format handled here follows the upstream source that prints it
// (SGLang, Mooncake, sgl-router/sgl-model-gateway, checked across release
// tags); comments cite the sections of kvtrail's SGLang log-format reference
// (§0, §a1, …). Sources are mixed streams: the Classifier reads each record
// by its own shape (registry.go lists the families), docs/formats.md
// documents them.
//
// Parsers hold per-source state (the Prometheus TYPE table, the glog year)
// and are not safe for concurrent use: use one Parser per source.
package parse
