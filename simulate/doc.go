// Package simulate is a deterministic discrete-event simulator of an SGLang
// prefill/decode (PD) deployment with Mooncake KV transfer. It writes the
// logs such a cluster really writes (SGLang text and JSON request logs,
// uvicorn access lines, Mooncake glog, gateway JSON access lines,
// Prometheus snapshots, optional page-level events), a sources manifest for
// `kvtrail ingest --manifest`, and a truth.json naming every request that
// was served foreign or stale KV data.
//
// The simulator is streaming: requests live only while they are in flight
// (an event heap ordered by simulated time), every output file is a buffered
// writer, and nothing reads the wall clock, so the same Config produces the
// same bytes.
package simulate
