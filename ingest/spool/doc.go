// Package spool is a bounded, durable, local queue of opaque batches. The
// ingest path writes a batch here when ClickHouse is unavailable, and only
// then acknowledges the push; a drain loop later replays the batches.
//
// On disk a spool is a directory of segment files, named by a sequence
// number, written in order and rotated at a size. Each record is framed as
//
//	length uint32 LE | crc uint32 LE | payload[length]
//
// where crc is CRC-32C (Castagnoli) over the length bytes and the payload,
// so a corrupted length is caught as well as a corrupted payload.
//
// Durability: Append returns only after the record is fsync'd. Concurrent
// Appends share fsyncs (group commit), so throughput grows with
// concurrency. A new segment's directory entry is fsync'd too.
//
// Delivery is at least once: Drain deletes a segment only after every
// record in it was delivered, and remembers (in memory) how far into the
// oldest segment it got, so after a restart the records of a partly
// drained segment are delivered again. Consumers must be idempotent.
//
// Recovery: a crash can leave a torn record at the end of a segment. Open
// validates every segment, truncates each at its first invalid record
// (partial header, partial payload, bad length or bad checksum), keeps
// everything before it, and reports what was cut (Recovered). A record
// after a corrupt one in the same segment cannot be found again reliably
// and is cut too; other segments are unaffected.
package spool
