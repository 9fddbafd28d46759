// Package chdbstore runs kvtrail's SQL on a modern ClickHouse (26.7) inside
// the process: chdb's libchdb.so, loaded through purego (no cgo) from the
// file FindLibrary finds ($CHDB_LIB_PATH, or the checkout's
// .cache/chdb/VERSION/libchdb.so).
//
// It implements the subset of the native driver that kvtrail uses (Query,
// QueryRow, Select, Exec, PrepareBatch, Ping: chstore.Conn), with the
// driver's own types: query results are read in ClickHouse's Native format
// and decoded by clickhouse-go's column code, and batch rows are encoded by
// the same code into a Native file that an INSERT ... SELECT FROM file()
// loads. Values therefore convert exactly as they do against a server,
// arguments are bound by the driver's binder (internal/chbind), and server
// errors come back as the driver's *clickhouse.Exception with their code.
// A chstore.Store over it (chstore.OpenConn) is the embedded engine of
// clickhouse.engine: embedded.
//
// The library is loaded on first use (LoadLibrary), not at init as chdb-go
// does (its init panics when the file is missing): so the package, and the
// kvtrail binary, build and run without it, and only the embedded engine
// needs the 566 MB file. One process holds a store directory at a time
// (Acquire, lock.go).
package chdbstore
