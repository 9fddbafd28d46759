package chstore

import (
	"context"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// SetSourceChunkBytes sets the bound text of sources per statement (for
// tests of the statements split by source) and returns the undo.
func SetSourceChunkBytes(n int) func() {
	old := sourceChunkBytes
	sourceChunkBytes = n
	return func() { sourceChunkBytes = old }
}

// SetSpeedPointsPerQuery sets how many rows one speed-point query groups
// until the returned restore is called (tests split a small read in parts).
func SetSpeedPointsPerQuery(n uint64) (restore func()) {
	old := speedPointsPerQuery
	speedPointsPerQuery = n
	return func() { speedPointsPerQuery = old }
}

// SaveFindingKeys writes the lookup keys of fs as SaveFindings does.
func SaveFindingKeys(ctx context.Context, s *Store, fs []domain.Finding) error {
	return s.saveFindingKeys(ctx, fs, false)
}

// AffectedRowsAdaptiveBlocks reads a reconstruction as AffectedRows does
// but with the server's default block size (the benchmark's baseline).
func (s *Store) AffectedRowsAdaptiveBlocks(ctx context.Context, id string) (string, []domain.AffectedRow, error) {
	return s.affectedRows(ctx, id)
}

// ReadsBlocks reports whether s reads the analysis's scans a block at a
// time (blocks.go).
func ReadsBlocks(s *Store) bool { return s.blocks != nil && !s.blocks.off.Load() }

// PointBlocksAt makes s's block reads go to addr (a test's stand-in for a
// server the block reader cannot speak to).
func PointBlocksAt(s *Store, addr string) { s.blocks.opts.Addrs = []string{addr} }

// OpenBlockInsert opens an INSERT of columns into table on the block path
// and drops it: an error if the path cannot take the table's types.
func OpenBlockInsert(ctx context.Context, s *Store, table string, columns []string) error {
	insert, err := insertStatement(table, columns)
	if err != nil {
		return err
	}
	w, err := s.openBlockInsert(ctx, insert, columns)
	if err != nil {
		return err
	}
	return w.Abort()
}

// BlockInserts is how many INSERTs s opened on the block path.
func BlockInserts(s *Store) int64 { return s.blocks.inserts.Load() }

// SetLinesPerQuery sets the bound of one of the statements cut into time
// spans ("minutes", "decode" or "votes") until restore is called.
func SetLinesPerQuery(which string, n int) (restore func()) {
	p := map[string]*int{"minutes": &minuteLinesPerQuery, "decode": &decodeLinesPerQuery,
		"votes": &hostVoteLinesPerQuery}[which]
	old := *p
	*p = n
	return func() { *p = old }
}

// InsertColumns inserts column slices into table as the analysis's saves
// do (insertColumns: one block, the arrays encoded where they are on the
// block path).
func InsertColumns(ctx context.Context, s *Store, table string, columns []string, cols ...any) error {
	return s.insertColumns(ctx, table, columns, cols...)
}

// DropStaleStages drops the staged notification lists whose newest part
// is older than before.
func (s *Store) DropStaleStages(ctx context.Context, before time.Time) error {
	return s.dropStaleStages(ctx, before)
}

// SetStageSettle sets how long a stage's Save waits for its rows and
// returns the undo.
func SetStageSettle(d time.Duration) func() {
	old := stageSettle
	stageSettle = d
	return func() { stageSettle = old }
}

// SpillPageSorts sets where the server's sort of the page events spills,
// for the rest of t.
func SpillPageSorts(t testing.TB, bytes int) {
	old := pageSortSpill
	pageSortSpill = bytes
	t.Cleanup(func() { pageSortSpill = old })
}
