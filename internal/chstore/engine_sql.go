package chstore

import (
	"fmt"
	"strings"
)

// The statements of the embedded engine's driver (internal/chdbstore):
// what it sends on libchdb to open a session and a database, check the
// engine answers, read a batch's column types and load a batch's Native
// block, as clickhouse-go does over the wire for a server. They live here
// with every other statement kvtrail sends.
const (
	// EngineSessionUTCSQL: kvtrail's servers run in UTC and bound times
	// carry no zone, so the embedded session must agree.
	EngineSessionUTCSQL = "SET session_timezone = 'UTC'"
	EngineVersionSQL    = "SELECT version()"
	EnginePingSQL       = "SELECT 1"
	// EngineColumnsSQL reads a table's column types (binds database, table).
	EngineColumnsSQL = "SELECT name, type FROM system.columns WHERE database = ? AND table = ?"
)

// EngineCreateDatabaseSQL creates a database; db is already quoted.
func EngineCreateDatabaseSQL(db string) string { return "CREATE DATABASE IF NOT EXISTS " + db }

// EngineInsertFromFileSQL loads a Native file into target's columns (target
// and cols already quoted; structure is the file's "name Type, ..." list).
func EngineInsertFromFileSQL(target, cols, path, structure string) string {
	return fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM file('%s', 'Native', '%s')", target, cols, cols,
		strings.ReplaceAll(path, "'", "\\'"), strings.ReplaceAll(structure, "'", "\\'"))
}

// EngineCreateTemporarySQL creates the session's temporary table of an
// external table sent with a query (name already quoted; structure its
// "name Type, ..." list); EngineDropTemporarySQL drops it after the query.
func EngineCreateTemporarySQL(name, structure string) string {
	return "CREATE TEMPORARY TABLE " + name + " (" + structure + ") ENGINE = Memory"
}

// EngineDropTemporarySQL drops a temporary table (name already quoted).
func EngineDropTemporarySQL(name string) string { return "DROP TEMPORARY TABLE IF EXISTS " + name }
