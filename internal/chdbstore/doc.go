// Package chdbstore runs kvtrail's SQL on a modern ClickHouse (26.7) inside
// the process: chdb's libchdb.so, loaded through purego by chdb-go (no cgo),
// from the file named by CHDB_LIB_PATH.
//
// It implements the subset of the native driver that analyze and ingest use
// (Query, QueryRow, Exec, PrepareBatch), with the driver's own types: query
// results are read in ClickHouse's Native format and decoded by
// clickhouse-go's column code, and batch rows are encoded by the same code
// into a Native file that an INSERT ... SELECT FROM file() loads. Values
// therefore convert exactly as they do against a server, and arguments are
// bound by the driver's binder (internal/chbind).
//
// The package is built only with the "chdb" build tag: chdb-go loads the
// library in its init and panics when it is missing, so nothing in the
// default build may link it.
package chdbstore
