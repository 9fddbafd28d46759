package chstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/kvtrail/kvtrail/domain"
)

// Raw lines' sources by reference (migration 0013). A line written since
// names its source (file path or push stream labels) and file_digest by
// source_ref, a line_sources row, and leaves its own two columns empty; a
// line stored before keeps its strings and source_ref 0. Every read of a
// line's source or digest gives both kinds the same values:
//
//   - reads that return lines select source_ref with them and fill the
//     names in Go from line_sources (resolveSources), a key read of a
//     table of one row per source;
//   - statements that must use the names inside ClickHouse (the copy into
//     case_evidence, an ORDER BY) read the sources first and pass them as
//     two arrays to transform(): lineSourceExpr.
//
// A ref's names never change (the ref is a hash of them), so what was read
// is cached for the process, whatever the database.

// LineSource is one line_sources row's names.
type LineSource struct {
	Source     string
	FileDigest string
}

// queryConn is what the source reads need of a connection.
type queryConn interface {
	Query(ctx context.Context, sql string, args ...any) (driver.Rows, error)
}

// maxCachedSources bounds the cache; past it the cache is emptied.
const maxCachedSources = 1 << 16

var sourceCache struct {
	sync.Mutex
	m map[uint64]LineSource
}

func cachedSources(refs []uint64, out map[uint64]LineSource) (missing []uint64) {
	sourceCache.Lock()
	defer sourceCache.Unlock()
	for _, r := range refs {
		if ls, ok := sourceCache.m[r]; ok {
			out[r] = ls
		} else {
			missing = append(missing, r)
		}
	}
	return missing
}

func cacheSources(got map[uint64]LineSource) {
	sourceCache.Lock()
	defer sourceCache.Unlock()
	if sourceCache.m == nil || len(sourceCache.m)+len(got) > maxCachedSources {
		sourceCache.m = make(map[uint64]LineSource, len(got))
	}
	for r, ls := range got {
		sourceCache.m[r] = ls
	}
}

// lineSourcesSQL reads the names of the given refs. Every row of a ref has
// the same names, so any() of them is the answer without FINAL.
const lineSourcesSQL = `SELECT source_ref, any(source), any(file_digest) FROM line_sources
WHERE has(?, source_ref) GROUP BY source_ref`

// readLineSources returns the names of refs (0 and unknown refs left out:
// a ref whose row is not stored yet reads as empty names).
func readLineSources(ctx context.Context, c queryConn, refs []uint64) (map[uint64]LineSource, error) {
	out := make(map[uint64]LineSource, len(refs))
	want := make([]uint64, 0, len(refs))
	seen := make(map[uint64]bool, len(refs))
	for _, r := range refs {
		if r != 0 && !seen[r] {
			seen[r] = true
			want = append(want, r)
		}
	}
	missing := cachedSources(want, out)
	got := make(map[uint64]LineSource, len(missing))
	for start := 0; start < len(missing); start += anListChunk {
		if err := readLineSourcesOnce(ctx, c, missing[start:min(start+anListChunk, len(missing))], got); err != nil {
			return nil, err
		}
	}
	for ref, ls := range got {
		out[ref] = ls
	}
	cacheSources(got)
	return out, nil
}

func readLineSourcesOnce(ctx context.Context, c queryConn, refs []uint64, got map[uint64]LineSource) error {
	rows, err := c.Query(ctx, lineSourcesSQL, refs)
	if err != nil {
		return fmt.Errorf("read line sources: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ref uint64
		var ls LineSource
		if err := rows.Scan(&ref, &ls.Source, &ls.FileDigest); err != nil {
			return fmt.Errorf("scan line source: %w", err)
		}
		got[ref] = ls
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read line sources: %w", err)
	}
	return nil
}

// nodeLineSourcesSQL reads a node's sources, for statements that need
// their names in ClickHouse.
const nodeLineSourcesSQL = `SELECT source_ref, any(source), any(file_digest) FROM line_sources
WHERE node = ? GROUP BY source_ref ORDER BY source_ref`

// sourceArrays are sources as transform()'s from and to arrays.
type sourceArrays struct {
	refs             []uint64
	sources, digests []string
}

func newSourceArrays(m map[uint64]LineSource) sourceArrays {
	var a sourceArrays
	for ref, ls := range m {
		a.refs = append(a.refs, ref)
		a.sources = append(a.sources, ls.Source)
		a.digests = append(a.digests, ls.FileDigest)
	}
	return a
}

// sourceChunkBytes bounds the sources bound into one statement: a server
// reads at most max_query_size (256 KiB by default) of query text, and a
// statement using lineSourceExpr for both names binds each ref three
// times and each name once (escaping can double a name's bytes).
var sourceChunkBytes = 96 << 10

// split returns a in parts whose bound text stays under maxBytes: one part
// (maybe empty) when all of a fits.
func (a sourceArrays) split(maxBytes int) []sourceArrays {
	out := []sourceArrays{{}}
	size := 0
	for i, ref := range a.refs {
		n := 3*22 + 2*(len(a.sources[i])+len(a.digests[i])) + 6
		if last := &out[len(out)-1]; len(last.refs) > 0 && size+n > maxBytes {
			out, size = append(out, sourceArrays{}), 0
		}
		last := &out[len(out)-1]
		last.refs = append(last.refs, ref)
		last.sources = append(last.sources, a.sources[i])
		last.digests = append(last.digests, a.digests[i])
		size += n
	}
	return out
}

// readNodeSources returns node's sources.
func readNodeSources(ctx context.Context, c queryConn, node string) (sourceArrays, error) {
	rows, err := c.Query(ctx, nodeLineSourcesSQL, node)
	if err != nil {
		return sourceArrays{}, fmt.Errorf("read line sources of %s: %w", node, err)
	}
	defer rows.Close()
	var a sourceArrays
	for rows.Next() {
		var ref uint64
		var src, digest string
		if err := rows.Scan(&ref, &src, &digest); err != nil {
			return sourceArrays{}, fmt.Errorf("scan line source: %w", err)
		}
		a.refs = append(a.refs, ref)
		a.sources = append(a.sources, src)
		a.digests = append(a.digests, digest)
	}
	if err := rows.Err(); err != nil {
		return sourceArrays{}, fmt.Errorf("read line sources of %s: %w", node, err)
	}
	return a, nil
}

// lineSourceExpr is a raw_lines row's source (or, digest set, its
// file_digest) as an SQL expression over a, with its two arguments: the
// row's own string when its source_ref is 0, else its source's from a
// (empty for a ref a does not hold). With no sources it is the column
// itself: every row the caller reads then has source_ref 0 (the caller
// filters so).
func lineSourceExpr(a sourceArrays, digest bool) (string, []any) {
	column, to := "source", a.sources
	if digest {
		column, to = "file_digest", a.digests
	}
	if len(a.refs) == 0 {
		return column, nil
	}
	return "if(source_ref = 0, " + column + ", transform(source_ref, ?, ?, ''))", []any{a.refs, to}
}

// lineSourceFilter keeps the rows whose names a can give: stored before
// migration 0013, or of a source in a.
func lineSourceFilter(a sourceArrays) (string, []any) {
	if len(a.refs) == 0 {
		return "source_ref = 0", nil
	}
	return "(source_ref = 0 OR has(?, source_ref))", []any{a.refs}
}

// uiResolveSources returns rows as evidence lines with their source and
// file_digest, from line_sources for rows that name theirs by reference.
func uiResolveSources(ctx context.Context, c queryConn, rows []uiRawLine) ([]domain.EvidenceLine, error) {
	refs := make([]uint64, 0, 8)
	for i := range rows {
		if rows[i].SourceRef != 0 {
			refs = append(refs, rows[i].SourceRef)
		}
	}
	var names map[uint64]LineSource
	if len(refs) > 0 {
		var err error
		if names, err = readLineSources(ctx, c, refs); err != nil {
			return nil, err
		}
	}
	out := make([]domain.EvidenceLine, len(rows))
	for i := range rows {
		out[i] = rows[i].EvidenceLine
		if ref := rows[i].SourceRef; ref != 0 {
			ls := names[ref]
			out[i].Source, out[i].FileDigest = ls.Source, ls.FileDigest
		}
	}
	return out, nil
}
