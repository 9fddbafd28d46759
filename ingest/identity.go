package ingest

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sort"
)

// A file source's identity (docs/architecture.md, "Source identity"):
//
//   - its stream is the node plus the digest of the first headBytes of its
//     content (decompressed), so a file that grows, its rotated copy and a
//     .gz of it are one stream; a line's id is FNV-64a(stream, offset), so
//     the same line written twice folds into one row;
//   - its source id is node + path + stream: one checkpoint per file;
//   - a file continues a stream only when the digest of its first
//     prefix_len bytes equals the one a checkpoint of that stream saved, and
//     then from that checkpoint's offset.
const headBytes = 4096

const statePartial = "partial"

// FileState is what file_checkpoints keeps beyond ingest_sources' columns.
type FileState struct {
	StreamID   string
	HeadLen    uint32
	HeadDigest string
	// PrefixLen bytes of the content had been read (and hashed into
	// PrefixDigest) when the checkpoint was saved; at least the offset.
	PrefixLen    uint64
	PrefixDigest string
	// ResumeOffset is where a continuation starts: the offset, or the
	// start of a last line the file ended inside (TailStatus its parse
	// status, "" when there is none).
	ResumeOffset uint64
	TailStatus   string
	// State is "partial" when the source could not be read to its end;
	// DamageOffset is then the compressed byte offset reading stopped at.
	State        string
	DamageOffset uint64
}

// fileState is the name the package's code uses.
type fileState = FileState

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// newStreamID names the stream that starts with head on node.
func newStreamID(node string, head []byte) string {
	h := sha256.New()
	_, _ = io.WriteString(h, "kvtrail-stream\x00"+node+"\x00")
	_, _ = h.Write(head)
	return hex.EncodeToString(h.Sum(nil))
}

// sourceKey is a file source's id: node + path + stream.
func sourceKey(node, path, stream string) string {
	return hexSum([]byte("kvtrail-source\x00" + node + "\x00" + path + "\x00" + stream))
}

// resumeAt is where a file continuing the checkpoint starts reading rows.
func (cp checkpoint) resumeAt() uint64 {
	if cp.File != nil && cp.File.TailStatus != "" {
		return cp.File.ResumeOffset
	}
	return cp.Offset
}

// candidate is a saved checkpoint whose head the file being ingested
// starts with.
type candidate struct {
	checkpoint
	verified bool // the file's first PrefixLen bytes hash to PrefixDigest
}

// loadCandidates returns the latest checkpoint of every file source on node
// whose head the content starting with head could continue: the same full
// head, or a shorter head (a file first read while it was short) that head
// starts with. They come from cache when it is not nil, else from s.
func loadCandidates(ctx context.Context, s Store, cache *candidateCache, node string, head []byte) ([]candidate, error) {
	var cps []Checkpoint
	var err error
	if cache != nil {
		cps, err = cache.lookup(ctx, node, uint32(len(head)), hexSum(head))
	} else {
		cps, err = s.FileCheckpointCandidates(ctx, node, uint32(len(head)), hexSum(head))
	}
	if err != nil {
		return nil, fmt.Errorf("read file checkpoints: %w", err)
	}
	var out []candidate
	for _, cp := range cps {
		hl := int(cp.File.HeadLen)
		if hl > len(head) || hexSum(head[:hl]) != cp.File.HeadDigest {
			continue
		}
		cp.Node = node
		cp = cp.zeroEpoch()
		out = append(out, candidate{checkpoint: cp})
	}
	return out, nil
}

// content opens a file's content: decompressed when it is gzip. raw counts
// the file bytes read.
func openContent(path string) (io.Reader, *countingReader, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open: %w", err)
	}
	counted := &countingReader{r: f}
	var r io.Reader = bufio.NewReaderSize(counted, 256<<10)
	closeFn := func() { f.Close() }
	if isGzip(path) {
		gz, err := gzip.NewReader(r)
		if err != nil {
			f.Close()
			return nil, nil, nil, fmt.Errorf("gunzip: %w", err)
		}
		r = gz
		closeFn = func() { gz.Close(); f.Close() }
	}
	return r, counted, closeFn, nil
}

// prefixScan reads a file's content from the start and returns its head
// and the digest of its first m bytes for every mark m it reaches. A read
// error (a damaged .gz) ends the scan like the end of the file: what is
// readable is what a stream can continue from.
func prefixScan(path string, head int, marks []uint64) (headBytes []byte, digests map[uint64]string, err error) {
	r, _, closeFn, err := openContent(path)
	if err != nil {
		return nil, nil, err
	}
	defer closeFn()
	buf := make([]byte, head)
	n, rerr := io.ReadFull(r, buf)
	buf = buf[:n]
	digests = map[uint64]string{}
	sort.Slice(marks, func(i, j int) bool { return marks[i] < marks[j] })
	h := sha256.New()
	var pos uint64
	feed := func(b []byte) {
		for len(b) > 0 {
			for len(marks) > 0 && marks[0] == pos {
				digests[pos] = hex.EncodeToString(h.Sum(nil))
				marks = marks[1:]
			}
			k := uint64(len(b))
			if len(marks) > 0 && marks[0]-pos < k {
				k = marks[0] - pos
			}
			_, _ = h.Write(b[:k])
			pos += k
			b = b[k:]
		}
		for len(marks) > 0 && marks[0] == pos {
			digests[pos] = hex.EncodeToString(h.Sum(nil))
			marks = marks[1:]
		}
	}
	feed(buf)
	if rerr != nil {
		if !errors.Is(rerr, io.EOF) && !errors.Is(rerr, io.ErrUnexpectedEOF) && !isDamage(rerr) {
			return nil, nil, fmt.Errorf("read: %w", rerr)
		}
		return buf, digests, nil
	}
	chunk := make([]byte, 256<<10)
	for len(marks) > 0 {
		k, err := r.Read(chunk)
		feed(chunk[:k])
		if err != nil {
			if errors.Is(err, io.EOF) || isDamage(err) {
				break
			}
			return nil, nil, fmt.Errorf("read: %w", err)
		}
	}
	return buf, digests, nil
}

// contentDigest is the SHA-256 of a file's readable content.
func contentDigest(path string) (string, error) {
	r, _, closeFn, err := openContent(path)
	if err != nil {
		return "", err
	}
	defer closeFn()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil && !isDamage(err) {
		return "", fmt.Errorf("digest: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// isDamage tells a damaged compressed stream (which ends what can be read,
// and is reported as a partial source) from an I/O error.
func isDamage(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) ||
		errors.As(err, &corrupt)
}

// identity is what a file source continues from.
type identity struct {
	key    string
	stream string
	head   []byte
	// cp is the checkpoint to resume from: its offset, and counts when it is
	// this source's own.
	cp checkpoint
	// from names the other source whose checkpoint the file continues
	// (a rotated or compressed copy), "" when it is its own or none.
	from string
	fork bool
}

// identify finds a file's stream and where to continue it: the verified
// checkpoint of the stream that reaches furthest. forcedSince (a forced
// run) discards offsets saved before it but keeps the stream. cache, when
// not nil, answers the checkpoint lookup (candidateCache).
func identify(ctx context.Context, s Store, cache *candidateCache, src Source, path string, forcedSince uint64, legacy legacySet) (identity, error) {
	head, _, err := prefixScan(path, headBytes, nil)
	if err != nil {
		return identity{}, err
	}
	cands, err := loadCandidates(ctx, s, cache, src.Node, head)
	if err != nil {
		return identity{}, err
	}
	var marks []uint64
	for _, c := range cands {
		marks = append(marks, c.File.PrefixLen)
	}
	var digests map[uint64]string
	if len(marks) > 0 {
		if _, digests, err = prefixScan(path, headBytes, marks); err != nil {
			return identity{}, err
		}
	}
	var best *candidate
	for i := range cands {
		c := &cands[i]
		d, ok := digests[c.File.PrefixLen]
		c.verified = ok && d == c.File.PrefixDigest
		if c.verified && c.Offset > 0 && (best == nil || c.Offset > best.Offset) {
			best = c
		}
	}
	id := identity{head: head, stream: newStreamID(src.Node, head)}
	if best != nil {
		id.stream = best.File.StreamID
	}
	// A checkpoint of the same stream that the file does not match: the
	// file shares the stream's head and then differs (or ends before that
	// checkpoint's prefix, so it cannot be shown to be the same bytes).
	// Its lines get a stream of their own, named by its content, so they
	// never take the ids of another file's lines: two different lines
	// under one id would be ambiguous evidence, or one row replaced by the
	// other.
	for _, c := range cands {
		if c.File.StreamID != id.stream || c.verified {
			continue
		}
		d := digests[c.File.PrefixLen]
		if d == "" {
			if d, err = contentDigest(path); err != nil {
				return identity{}, err
			}
		}
		id.stream = hexSum([]byte(id.stream + "\x00fork\x00" + d))
		id.fork, best = true, nil
		break
	}
	id.key = sourceKey(src.Node, src.Path, id.stream)
	id.cp = checkpoint{SourceID: id.key}
	if best == nil {
		if !legacy.mayHave(src.Node, src.Path) {
			return id, nil
		}
		return legacyIdentity(ctx, s, src, path, id, forcedSince)
	}
	if forcedSince > 0 && best.Version < forcedSince {
		return id, nil // a forced run redoes the file, under the same stream
	}
	var own *candidate
	for i := range cands {
		if c := &cands[i]; c.SourceID == id.key && c.verified && c.File.StreamID == id.stream {
			own = c
		}
	}
	switch {
	case own == best || (own != nil && own.Offset == best.Offset):
		id.cp = own.checkpoint
	default:
		// Another file of the stream got further (a rotated or compressed
		// copy): continue from its offset; this source counts only the
		// lines it adds, so counts summed over sources are distinct lines.
		id.from = best.Path
		id.cp.Offset = best.resumeAt()
		if own != nil {
			id.cp.Counts, id.cp.FirstTS, id.cp.LastTS = own.Counts, own.FirstTS, own.LastTS
		}
		id.cp.Counts.Bytes = best.Offset
	}
	id.cp.File = best.File
	return id, nil
}

// legacyLister is a store that lists, in one query, the node and path of
// every source saved before file_checkpoints existed (internal/chstore).
type legacyLister interface {
	LegacySourcePaths(ctx context.Context) ([]NodePath, error)
}

// NodePath names a file source by its node and configured path.
type NodePath struct{ Node, Path string }

// legacySet is the node and path of every source saved before
// file_checkpoints existed, read when a run starts. Without it each file
// with no checkpoint of its own asked the store for legacy checkpoints
// before it was read: a query of a few milliseconds of server time and
// up to ten of wall per source, almost always answered with nothing.
// Reading the set once is safe because no writer creates such rows any
// more (they only go away, when their file is continued); the rows of a
// source being saved right now, in ingest_sources and not yet in
// file_checkpoints, are not legacy (their id is not their file's digest,
// which legacyIdentity checks) and are rightly left out. A nil set means
// the store could not list them: every file asks, as before.
type legacySet map[NodePath]struct{}

// loadLegacySet reads the set, or returns nil when the store cannot list
// it (a failure here is left to the per-file query to report).
func loadLegacySet(ctx context.Context, s Store) legacySet {
	l, ok := s.(legacyLister)
	if !ok {
		return nil
	}
	paths, err := l.LegacySourcePaths(ctx)
	if err != nil {
		return nil
	}
	set := make(legacySet, len(paths))
	for _, p := range paths {
		set[p] = struct{}{}
	}
	return set
}

// mayHave reports whether node and path may have legacy checkpoints.
func (l legacySet) mayHave(node, path string) bool {
	if l == nil {
		return true
	}
	_, ok := l[NodePath{node, path}]
	return ok
}

// legacyIdentity continues a file ingested before file_checkpoints existed
// (migration 0004): its source id and line ids were the SHA-256 of the
// whole file. If this node and path have such a checkpoint and the file's
// first size bytes still hash to it, the file keeps that id as its stream,
// so its lines keep their ids, and continues from the offset saved.
func legacyIdentity(ctx context.Context, s Store, src Source, path string, id identity, forcedSince uint64) (identity, error) {
	legacies, err := s.LegacySourceCheckpoints(ctx, src.Node, src.Path)
	if err != nil {
		return id, fmt.Errorf("read checkpoints: %w", err)
	}
	for _, l := range legacies {
		legacy := l.SourceID
		if len(legacy) != 64 || legacy == id.key {
			continue
		}
		d, err := rawPrefixDigest(path, l.Size)
		if err != nil {
			return id, err
		}
		if d != legacy {
			continue
		}
		cp, err := loadCheckpoint(ctx, s, legacy)
		if err != nil {
			return id, err
		}
		id.stream, id.key = legacy, legacy
		if forcedSince > 0 && l.Version < forcedSince {
			id.cp = checkpoint{SourceID: legacy}
			return id, nil
		}
		cp.Offset, cp.Size = l.Offset, l.Size
		if st, err := os.Stat(path); err == nil && uint64(st.Size()) > l.Size {
			cp.Complete = false // it grew
		}
		id.cp = cp
		return id, nil
	}
	return id, nil
}

// rawPrefixDigest is the SHA-256 of a file's first n bytes as stored, ""
// when it is shorter.
func rawPrefixDigest(path string, n uint64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	k, err := io.CopyN(h, f, int64(n))
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("digest: %w", err)
	}
	if uint64(k) < n {
		return "", nil
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashingReader hashes every byte it passes: the digest of the prefix read
// so far, saved with each checkpoint.
type hashingReader struct {
	r    io.Reader
	h    hash.Hash
	n    uint64
	last byte // the last byte read
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	_, _ = h.h.Write(p[:n])
	h.n += uint64(n)
	if n > 0 {
		h.last = p[n-1]
	}
	return n, err
}

func (h *hashingReader) digest() string { return hex.EncodeToString(h.h.Sum(nil)) }
