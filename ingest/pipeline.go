package ingest

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// Options tune the pipeline. Zero values mean the defaults.
type Options struct {
	// WindowRecords ends a commit window after this many records (default
	// 1,000,000, what ClickHouse squashes into one part by default): its
	// INSERTs are completed and its checkpoints saved. Rows stream to the
	// server as they are read, so the window's size does not cost memory
	// here.
	WindowRecords int
	// WindowBytes ends a window after this much raw text (default 256 MiB,
	// ClickHouse's default squashing limit).
	WindowBytes int
	// WindowInterval ends a window at least this often (default 10 s): how
	// much work a crash can cost, and how stale checkpoints can be.
	WindowInterval time.Duration
	// MaxOpenInserts is how many INSERTs (one per table) a window keeps
	// open, each on a pooled connection. Default: the store's pool size
	// minus two (for the reads that go on meanwhile), at least one; fewer
	// than the tables a window touches ends windows early.
	MaxOpenInserts int
	// Force re-ingests sources already recorded as complete.
	Force bool
	// Retries is how many attempts in a row may fail on ClickHouse writes
	// without committing anything before the run gives up (default 5, with
	// waits of 1, 2, 4, 8 and 16 s: a restart or failover of half a
	// minute). Each retry resumes every unfinished source from its
	// checkpoint; an attempt that committed something resets the count.
	Retries int
	// Workers is how many sources are parsed at once (default 2).
	Workers int
	// Progress, if set, is told about bytes and records as they are read.
	Progress Progress
	Logger   *slog.Logger
	// TempDir receives the copy of stdin (default os.TempDir()).
	TempDir string
	// Claims, when set, makes this run one ingest worker among several
	// given the same sources: each source is claimed before it is read
	// and left to the worker that holds it (see Claims). Nil: every
	// source is this run's.
	Claims Claims
	// ClaimPoll is how often a worker looks again at the sources other
	// workers hold (default a quarter of the lease, at most 2 s).
	ClaimPoll time.Duration
	// ClaimAhead is how many sources, with Claims, may be claimed beyond
	// those being read (default 8), and ClaimAheadBytes how many bytes
	// they may hold in all (default 64 MiB, about a second of reading):
	// a claim waits its settle window, which claiming ahead hides.
	ClaimAhead      int
	ClaimAheadBytes int64
}

// Progress receives read progress of a whole run. Add may be called from
// several goroutines at once.
type Progress interface {
	Start(totalBytes int64)
	Add(bytes int64, records int64)
	Finish()
}

// poolSizer is a store that says how many connections it pools
// (internal/chstore.Store).
type poolSizer interface{ MaxOpenConns() int }

func (o *Options) defaults(s Store) {
	if o.WindowRecords <= 0 {
		o.WindowRecords = 1_000_000
	}
	if o.WindowBytes <= 0 {
		o.WindowBytes = 256 << 20
	}
	if o.WindowInterval <= 0 {
		o.WindowInterval = 10 * time.Second
	}
	if o.MaxOpenInserts <= 0 {
		o.MaxOpenInserts = 6
		if p, ok := s.(poolSizer); ok {
			o.MaxOpenInserts = max(1, p.MaxOpenConns()-2)
		}
	}
	if o.Retries <= 0 {
		o.Retries = 5
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.ClaimAhead <= 0 {
		o.ClaimAhead = 8
	}
	if o.ClaimAheadBytes <= 0 {
		o.ClaimAheadBytes = 64 << 20
	}
	if o.Claims != nil && o.ClaimPoll <= 0 {
		o.ClaimPoll = max(min(o.Claims.Lease()/4, 2*time.Second), 10*time.Millisecond)
	}
}

// Ingester writes sources into ClickHouse.
type Ingester struct {
	store Store
	opts  Options
	// forcedSince, in a forced run, is when the run began: a checkpoint
	// saved before it is ignored, one saved by the run itself (before a
	// retry) is resumed from.
	forcedSince uint64
	// claims are the run's source claims when it is one worker of several.
	claims *claimSet
	// legacy lists the node and path of every source saved before
	// file_checkpoints existed, read once per run; nil when the store
	// cannot list them, and then every file asks (see legacySet).
	legacy legacySet
	// cands answers the files' checkpoint lookups, one read per node per
	// attempt; nil when the store cannot list a node's (candidateCache).
	cands *candidateCache
	// readSlots, with claims, bounds the sources read at once to Workers
	// while ClaimAhead more goroutines claim: a claim waits its settle
	// window, which would otherwise leave a reader idle for every source.
	// ahead bounds the bytes those claimed sources hold meanwhile.
	readSlots chan struct{}
	ahead     *aheadBudget
}

// New returns an Ingester writing to store.
func New(store Store, opts Options) *Ingester {
	opts.defaults(store)
	return &Ingester{store: store, opts: opts}
}

// Counts are per-source or per-format record counters.
type Counts struct {
	Records   uint64 `json:"records"`
	Parsed    uint64 `json:"parsed"`
	Unknown   uint64 `json:"unknown"`
	Malformed uint64 `json:"malformed"`
	Bytes     uint64 `json:"bytes"`
	// Noise counts recognised lines kvtrail deliberately does not extract
	// (parse.StatusNoise); Unknown is what is new to kvtrail. Not kept in
	// ingest_sources: a resumed run recounts it while replaying the
	// committed prefix, a skipped source reports 0.
	Noise uint64 `json:"noise"`
}

func (c *Counts) add(o Counts) {
	c.Records += o.Records
	c.Parsed += o.Parsed
	c.Unknown += o.Unknown
	c.Noise += o.Noise
	c.Malformed += o.Malformed
	c.Bytes += o.Bytes
}

// SourceResult says what happened to one source.
type SourceResult struct {
	Path     string `json:"path"`
	SourceID string `json:"source_id"`
	Node     string `json:"node"`
	Role     string `json:"role"`
	Format   string `json:"format"`
	// State is ingested, skipped (already complete), partial (stored up
	// to damage, see Error) or failed.
	State       string    `json:"state"`
	ResumedFrom int64     `json:"resumed_from,omitempty"`
	FirstTS     time.Time `json:"first_ts"`
	LastTS      time.Time `json:"last_ts"`
	Counts
	// MalformedReasons counts the most common reasons (capped).
	MalformedReasons map[string]uint64 `json:"malformed_reasons,omitempty"`
	Error            string            `json:"error,omitempty"`
	// Warning: ingested, but no line was recognised (every line kept as
	// unknown evidence).
	Warning string `json:"warning,omitempty"`
}

// Summary is the result of an ingest run.
type Summary struct {
	Sources  []SourceResult    `json:"sources"`
	ByFormat map[string]Counts `json:"by_format"`
	Total    Counts            `json:"total"`
	Seconds  float64           `json:"seconds"`
}

// Ingest ingests sources with Workers sources parsed in parallel and one
// writer that streams rows across sources into ClickHouse. A failed source
// is recorded in the summary and the others still run; the returned error
// joins the failures. When ClickHouse writes fail, the run is retried
// (with backoff, see Retries) from the checkpoints, like a rerun after a
// crash; if they fail for good, every source not yet committed is reported
// failed and resumes on the next run.
//
// With Options.Claims the run is one worker among several (see Claims):
// it ingests the sources it can claim and waits for the others until
// every source is complete.
func (in *Ingester) Ingest(ctx context.Context, sources []Source) (Summary, error) {
	if in.opts.Claims != nil {
		return in.ingestShared(ctx, sources)
	}
	return in.run(ctx, sources, in.opts, nil)
}

// run is one pass of Ingest over sources, with its retries; cs, when not
// nil, claims each source first.
func (in *Ingester) run(ctx context.Context, sources []Source, opts Options, cs *claimSet) (Summary, error) {
	start := time.Now()
	if p := opts.Progress; p != nil {
		p.Start(totalSize(sources))
		defer p.Finish()
	}
	var forcedSince uint64
	if opts.Force {
		forcedSince = uint64(start.UnixNano())
	}
	legacy := loadLegacySet(ctx, in.store)
	earlier := map[int]SourceResult{} // committed by a failed attempt
	for failed := 0; ; failed++ {
		sum, retry, progress, err := (&Ingester{store: in.store, opts: opts, forcedSince: forcedSince, claims: cs, legacy: legacy}).attempt(ctx, sources)
		for i, r := range sum.Sources {
			if e, ok := earlier[i]; ok && r.State == "skipped" {
				sum.Sources[i] = e // finished by this run, before the retry
			}
		}
		if progress {
			failed = 0
		}
		if !retry || failed >= in.opts.Retries || ctx.Err() != nil {
			sum.Seconds = time.Since(start).Seconds()
			return sum.recount(), err
		}
		for i, r := range sum.Sources {
			if r.State == "ingested" {
				earlier[i] = r
			}
		}
		wait := time.Duration(1<<failed) * time.Second
		in.opts.Logger.Warn("ClickHouse write failed; resuming from checkpoints", slog.Int("failures_in_a_row", failed+1),
			slog.Duration("wait", wait), slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
			return sum.recount(), errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		opts.Progress = nil
	}
}

// recount rebuilds the per-format and total counts from the sources.
func (sum Summary) recount() Summary {
	sum.ByFormat = map[string]Counts{}
	sum.Total = Counts{}
	for _, res := range sum.Sources {
		c := sum.ByFormat[res.Format]
		c.add(res.Counts)
		sum.ByFormat[res.Format] = c
		sum.Total.add(res.Counts)
	}
	return sum
}

// attempt is one pass over the sources. retry reports that it ended on a
// ClickHouse write failure, which a new attempt can resume from; progress
// that it committed at least one window.
func (in *Ingester) attempt(ctx context.Context, sources []Source) (sum Summary, retry, progress bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]SourceResult, len(sources))
	for i, src := range sources {
		results[i] = SourceResult{Path: src.Path, Node: src.Node, Role: src.Role, Format: string(src.Format)}
	}
	if err := saveNodes(ctx, in.store, sources); err != nil {
		for i := range results {
			results[i].State, results[i].Error = "failed", err.Error()
		}
		return Summary{Sources: results}, true, false, err
	}

	chunks := make(chan *chunk, in.opts.Workers)
	free := make(chan *Batch, in.opts.Workers*2+1)
	for i := 0; i < cap(free); i++ {
		free <- &Batch{}
	}
	in.cands = newCandidateCache(in.store)
	fl := newFlusher(in.store, in.opts)
	fl.onSaved = in.cands.saved
	if cs := in.claims; cs != nil {
		// Done once the final checkpoint is committed, not when the run
		// ends: a crash after it then costs no takeover wait.
		fl.onComplete = func(ctx context.Context, sourceID string) { cs.end(ctx, sourceID, true) }
	}
	flushErr := make(chan error, 1)
	go func() {
		err := fl.run(ctx, chunks, free)
		if err != nil {
			cancel() // stop the readers: nothing more can be committed
		}
		flushErr <- err
	}()

	jobs := make(chan int)
	errs := make([]error, len(sources))
	var wg sync.WaitGroup
	goroutines := in.opts.Workers
	order := make([]int, len(sources))
	for i := range order {
		order[i] = i
	}
	if in.claims != nil {
		in.readSlots = make(chan struct{}, in.opts.Workers)
		in.ahead = newAheadBudget(in.opts.ClaimAheadBytes)
		goroutines += in.opts.ClaimAhead
		order = claimOrder(in.claims.c.Worker(), sources)
	}
	for w := 0; w < goroutines; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				res, err := in.ingestOne(ctx, sources[i], chunks, free)
				results[i], errs[i] = res, err
			}
		}()
	}
	for _, i := range order {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	close(chunks)
	werr := <-flushErr

	var all []error
	var unwritten []string // sources not committed because the write failed
	for i := range results {
		res := &results[i]
		var partial *PartialError
		switch {
		case errors.As(errs[i], &partial) && fl.committed[res.SourceID]:
			res.State, res.Error = "partial", errs[i].Error()
			all = append(all, fmt.Errorf("%s: %w", res.Path, errs[i]))
		case errs[i] != nil:
			res.State, res.Error = "failed", errs[i].Error()
		case res.State == "pending" && fl.committed[res.SourceID]:
			res.State = "ingested"
		case res.State == "pending" || res.State == "":
			res.State = "failed"
			res.Error = "not committed"
			if werr != nil {
				res.Error = "not committed: " + werr.Error()
			} else if ctx.Err() != nil {
				res.Error = "not committed: " + ctx.Err().Error()
			}
		}
		switch {
		case res.State == "failed" && werr != nil && errs[i] == nil:
			unwritten = append(unwritten, res.Path)
		case res.State == "failed":
			all = append(all, fmt.Errorf("%s: %s", res.Path, res.Error))
		}
	}
	if werr != nil {
		// Once, not once per source: a full disk or a server gone fails
		// every open source alike (each source's result keeps it).
		if len(unwritten) > 0 {
			werr = fmt.Errorf("%s not committed: %w", namedSources(unwritten), werr)
		}
		all = append(all, werr)
	}
	var we errWrite
	return Summary{Sources: results}, errors.As(werr, &we), fl.windows > 0, errors.Join(all...)
}

// namedSources names paths in a message: all of them up to five, else the
// first five and how many more.
func namedSources(paths []string) string {
	const named = 5
	if len(paths) == 1 {
		return "1 source (" + paths[0] + ")"
	}
	if len(paths) <= named {
		return fmt.Sprintf("%d sources (%s)", len(paths), strings.Join(paths, ", "))
	}
	return fmt.Sprintf("%d sources (%s and %d more)", len(paths), strings.Join(paths[:named], ", "), len(paths)-named)
}

func totalSize(sources []Source) int64 {
	var n int64
	for _, s := range sources {
		if st, err := os.Stat(s.Path); err == nil {
			n += st.Size()
		}
	}
	return n
}

// singleLine formats are one record per physical line: a leading space
// there is data, not a traceback continuation.
func singleLine(f parse.Format) bool { return parse.SingleLine(f) }

// IngestSource ingests one source, resuming from its checkpoint.
func (in *Ingester) IngestSource(ctx context.Context, src Source) (SourceResult, error) {
	sum, err := in.Ingest(ctx, []Source{src})
	return sum.Sources[0], err
}

// ingestOne reads one source and hands its rows to the flusher in chunks.
// The result's State is "pending" until the flusher commits its final
// checkpoint, or "skipped".
func (in *Ingester) ingestOne(ctx context.Context, src Source, chunks chan<- *chunk, free chan *Batch) (SourceResult, error) {
	res := SourceResult{Path: src.Path, Node: src.Node, Role: src.Role, Format: string(src.Format)}
	if err := src.Validate(); err != nil {
		return res, err
	}
	path, cleanup, err := in.materialize(src.Path)
	if err != nil {
		return res, err
	}
	defer cleanup()
	st, err := os.Stat(path)
	if err != nil {
		return res, fmt.Errorf("stat: %w", err)
	}
	size := st.Size()
	id, err := identify(ctx, in.store, in.cands, src, path, in.forcedSince, in.legacy)
	if err != nil {
		return res, err
	}
	res.SourceID = id.key
	// Bytes claimed ahead of reading, given back once the source has a
	// read slot or is not this worker's to read.
	var aheadBytes int64
	defer func() {
		if aheadBytes > 0 {
			in.ahead.give(aheadBytes)
		}
	}()
	if cs := in.claims; cs != nil && !(id.cp.Complete && id.cp.Size == uint64(size)) {
		if !in.ahead.take(ctx, size) {
			return res, ctx.Err()
		}
		aheadBytes = size
		held, done, err := cs.claim(ctx, id.key, size)
		if err != nil {
			return res, err
		}
		if !held && !done {
			res.State = stateElsewhere
			return res, nil
		}
		// Read the checkpoint again, from the store: the worker that held
		// the source before (or finished it meanwhile) may have committed
		// more since it was read above.
		key := id.key
		if id, err = identify(ctx, in.store, nil, src, path, in.forcedSince, in.legacy); err != nil {
			if held {
				cs.end(ctx, key, false)
			}
			return res, err
		}
		res.SourceID = id.key
		if held {
			cs.rekey(key, id.key)
		}
		if done && !(id.cp.Complete && id.cp.Size == uint64(size)) {
			res.State = "skipped"
			res.Warning = "recorded done by another ingest worker, but its checkpoint is not complete (a partial source: see that worker's summary)"
			return res, nil
		}
		if held && id.cp.Complete && id.cp.SourceID == id.key && id.cp.Size == uint64(size) {
			cs.end(ctx, id.key, true) // finished by its previous holder after all
		}
	}
	cp := id.cp
	if cp.Complete && cp.SourceID == id.key && cp.Size == uint64(size) {
		res.State, res.Format = "skipped", cp.Format
		res.Counts, res.FirstTS, res.LastTS = cp.Counts, cp.FirstTS, cp.LastTS
		if p := in.opts.Progress; p != nil {
			p.Add(size, int64(cp.Records))
		}
		in.opts.Logger.Info("source already ingested", slog.String("path", src.Path), slog.String("source_id", id.key[:12]))
		return res, nil
	}
	if f := cp.File; f != nil && f.TailStatus != "" && cp.SourceID == id.key && cp.Offset > f.ResumeOffset {
		// Continue at the line that was being written: it is read and
		// counted again, whole.
		cp.Offset = f.ResumeOffset
		cp.Records--
		switch parse.Status(f.TailStatus) {
		case parse.StatusParsed:
			cp.Parsed--
		case parse.StatusMalformed:
			cp.Malformed--
		default:
			cp.Unknown--
		}
	}
	if id.fork {
		in.opts.Logger.Warn("file starts like one ingested before but differs later: ingested as a stream of its own",
			slog.String("path", src.Path))
	}

	if in.readSlots != nil {
		select {
		case in.readSlots <- struct{}{}:
		case <-ctx.Done():
			return res, ctx.Err()
		}
		defer func() { <-in.readSlots }()
		if aheadBytes > 0 {
			in.ahead.give(aheadBytes)
			aheadBytes = 0
		}
	}
	format := src.Format
	if format == FormatAuto || format == "" {
		format, err = detect(path)
		if err != nil {
			return res, err
		}
	}
	res.Format = string(format)
	parser, err := parse.NewClassifier(format, parse.ParseOptions{
		Location: src.Location, ClockOffset: src.ClockOffset, Year: src.Year,
		DefaultTime: modTime(path), Gateway: src.Gateway,
	})
	if err != nil {
		return res, err
	}

	stream, counted, closeContent, err := openContent(path)
	if err != nil {
		return res, err
	}
	defer closeContent()
	hashed := &hashingReader{r: stream, h: sha256.New()}

	run := &sourceRun{
		in: in, src: src, sourceID: id.stream, key: id.key, size: uint64(size), path: src.Path, format: format,
		parser: parser, counted: counted, cp: cp, hashed: hashed,
		file:   &fileState{StreamID: id.stream, HeadLen: uint32(len(id.head)), HeadDigest: hexSum(id.head)},
		reader: parse.NewReader(hashed, parse.ReaderOptions{SingleLine: singleLine(format)}),
	}
	if cp.Offset > 0 {
		res.ResumedFrom = int64(cp.Offset)
		in.opts.Logger.Info("resuming source", slog.String("path", src.Path), slog.Uint64("offset", cp.Offset),
			slog.String("stored_by", id.from))
	}
	err = run.run(ctx, chunks, free)
	// Seconds, as ingest_sources stores them: a resumed run reports the
	// same span as an uninterrupted one.
	res.Counts, res.FirstTS, res.LastTS = run.cp.Counts, run.cp.FirstTS.Truncate(time.Second), run.cp.LastTS.Truncate(time.Second)
	res.MalformedReasons = run.reasons
	if err != nil {
		return res, err
	}
	if c := res.Counts; c.Records > 0 && c.Parsed+c.Malformed+c.Noise == 0 && res.ResumedFrom == 0 {
		res.Warning = "no line recognised: every line kept in raw_lines as unknown"
		in.opts.Logger.Warn("no line recognised", slog.String("path", src.Path), slog.Uint64("lines", c.Records))
	}
	res.State = "pending"
	return res, nil
}

// materialize returns a regular file path for src: stdin is copied to a
// temporary file first, because the source's identity (part of every line
// id) must be known before the first row is written, and a continued
// stream's prefix is verified before it.
func (in *Ingester) materialize(p string) (string, func(), error) {
	if p != "-" {
		return p, func() {}, nil
	}
	tmp, err := os.CreateTemp(in.opts.TempDir, "kvtrail-stdin-*")
	if err != nil {
		return "", nil, fmt.Errorf("spool stdin: %w", err)
	}
	if _, err := io.Copy(tmp, os.Stdin); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", nil, fmt.Errorf("spool stdin: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", nil, fmt.Errorf("spool stdin: %w", err)
	}
	return tmp.Name(), func() { os.Remove(tmp.Name()) }, nil
}

func isGzip(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [2]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		return false
	}
	return magic[0] == 0x1f && magic[1] == 0x8b
}

func detect(path string) (parse.Format, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if isGzip(path) {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return parse.FormatUnknown, nil // damaged: reading it reports where
		}
		defer gz.Close()
		r = gz
	}
	sample := make([]byte, parse.DetectSampleBytes)
	n, err := io.ReadFull(r, sample)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) && !isDamage(err) {
		return "", fmt.Errorf("read sample: %w", err)
	}
	// FormatUnknown is fine: every line is classified by its own shape.
	return parse.Detect(sample[:n]), nil
}

func modTime(path string) time.Time {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// sourceRun is the state of one source being ingested.
type sourceRun struct {
	in  *Ingester
	src Source
	// sourceID names the stream line ids derive from; key, when set, the
	// source's checkpoint (a file's node + path + stream).
	sourceID string
	key      string
	file     *fileState // file sources: identity saved with each checkpoint
	hashed   *hashingReader
	size     uint64
	path     string
	format   parse.Format
	parser   parse.Parser
	reader   *parse.Reader
	counted  *countingReader
	boots    parse.BootTracker
	lastTS   time.Time
	cp       checkpoint
	reasons  map[string]uint64
	// ref is the line_sources key of the source's lines (SourceRef),
	// computed on its first line.
	ref uint64
}

const maxReasons = 20

// run reads records, replays the already-committed prefix to rebuild parser
// and boot state without writing it, and hands the rest to the flusher in
// chunks, each with the checkpoint that holds once its rows are written.
func (r *sourceRun) run(ctx context.Context, chunks chan<- *chunk, free chan *Batch) error {
	resumeAt := int64(r.cp.Offset)
	counts := r.cp.Counts
	firstTS, lastTS := r.cp.FirstTS, r.cp.LastTS
	r.reasons = map[string]uint64{}
	var b *Batch
	select {
	case b = <-free:
	case <-ctx.Done():
		return ctx.Err()
	}
	var lastProgress, progressRecords int64
	var damage *PartialError
	var last lastRecord // the last record emitted
	var tail *lastRecord
	// send hands b on with the checkpoint that holds once it is written:
	// every record before content offset at.
	send := func(final bool, at int64) error {
		key := r.key
		if key == "" {
			key = r.sourceID
		}
		cp := checkpoint{
			SourceID: key, Path: r.path, Node: r.src.Node, Role: r.src.Role, Format: string(r.format),
			Counts: counts, Offset: uint64(at), Size: r.size, Complete: final,
			FirstTS: firstTS, LastTS: lastTS,
		}
		cp.Counts.Bytes = cp.Offset
		if r.file != nil {
			f := *r.file
			f.PrefixLen, f.PrefixDigest = r.hashed.n, r.hashed.digest()
			f.ResumeOffset, f.TailStatus = cp.Offset, ""
			if tail != nil {
				f.ResumeOffset, f.TailStatus = uint64(tail.offset), string(tail.status)
			}
			if damage != nil {
				f.State, f.DamageOffset = statePartial, uint64(damage.Damage)
			}
			cp.File = &f
		}
		r.cp = cp
		if p := r.in.opts.Progress; p != nil {
			p.Add(r.counted.n-lastProgress, progressRecords)
			lastProgress, progressRecords = r.counted.n, 0
		}
		select {
		case chunks <- &chunk{b: b, cp: cp}:
		case <-ctx.Done():
			return ctx.Err()
		}
		if final {
			return nil
		}
		select {
		case b = <-free:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	for {
		rec, err := r.reader.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if r.file == nil {
				free <- b
				return fmt.Errorf("read at offset %d: %w", r.reader.Offset(), err)
			}
			// A damaged .gz or a read error: keep every record read up
			// to it, committed with a checkpoint marked partial.
			damage = &PartialError{Path: r.path, Offset: r.reader.Offset(), Damage: r.counted.n, Err: err}
			break
		}
		parsed := safeParse(r.parser, rec)
		ts := parsed.TS
		if ts.IsZero() {
			ts = r.lastTS // continuation or time-less line: the time of the record before it
		} else {
			r.lastTS = ts
		}
		bf, bootChanged := r.boots.Observe(parsed, rec.Offset)
		if rec.Offset < resumeAt {
			if parsed.Status == parse.StatusNoise {
				counts.Noise++ // not in the checkpoint: recounted from the replay
			}
			continue // committed before a crash: replayed for state only
		}
		if b.cutBefore(ts) {
			// The checkpoint holds every record before this one, which
			// opens the next chunk.
			if err := send(false, rec.Offset); err != nil {
				return err
			}
		}
		last = lastRecord{offset: rec.Offset, status: parsed.Status, ok: true}
		counts.Records++
		progressRecords++
		switch parsed.Status {
		case parse.StatusParsed:
			counts.Parsed++
		case parse.StatusNoise:
			counts.Noise++
		case parse.StatusMalformed:
			counts.Malformed++
			if len(r.reasons) < maxReasons || r.reasons[parsed.Reason] > 0 {
				r.reasons[parsed.Reason]++
			}
		default:
			counts.Unknown++
		}
		if !ts.IsZero() {
			if firstTS.IsZero() || ts.Before(firstTS) {
				firstTS = ts
			}
			if ts.After(lastTS) {
				lastTS = ts
			}
		}
		r.addRecord(b, rec, parsed, ts)
		if bootChanged {
			r.addBoot(b, bf)
		}
	}
	if r.file != nil && last.ok && r.hashed.n > 0 && r.hashed.last != '\n' {
		// The file ends inside a line, most likely one still being
		// written (or cut by damage). It is stored and counted as read, but a continuation
		// starts at it (and counts it once): when the file has grown, the
		// line is read again whole and its rows (same line id) replace
		// these.
		tail = &last
	}
	if err := send(true, r.reader.Offset()); err != nil {
		return err
	}
	if damage != nil {
		return damage
	}
	return nil
}

type lastRecord struct {
	offset int64
	status parse.Status
	ok     bool
}

// PartialError reports a source read only up to damage: its records up to
// Offset (of the content, decompressed) are stored and the source is
// recorded as partial; Damage is the file byte offset reading reached.
type PartialError struct {
	Path   string
	Offset int64
	Damage int64
	Err    error
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("partial: read failed at file byte %d, kept records up to content offset %d: %v", e.Damage, e.Offset, e.Err)
}

func (e *PartialError) Unwrap() error { return e.Err }

// Chunk bounds: small enough that several sources interleave in one flush
// and memory stays bounded, large enough that channel traffic is cheap. A
// full chunk still takes the records of its last second (Batch.cutBefore),
// up to twice the bounds.
const (
	chunkRecords = 4096
	chunkBytes   = 4 << 20
)

func (r *sourceRun) addRecord(b *Batch, rec parse.Record, p parse.Parsed, ts time.Time) {
	node, role := r.src.Node, r.src.Role
	id := LineID(r.sourceID, rec.Offset)
	reason := p.Reason
	if rec.Truncated {
		reason = strings.TrimSpace(reason + " (record truncated to the size cap)")
	}
	format := r.format
	if p.Format != "" {
		format = p.Format // the line's own format in a mixed stream
	}
	if r.ref == 0 {
		r.ref = SourceRef(node, r.path, r.sourceID)
	}
	b.raw = append(b.raw, rawRow{
		ts: ts, node: node, role: role, format: string(format), source: r.path, digest: r.sourceID, ref: r.ref,
		offset: uint64(rec.Offset), lineNo: uint64(rec.LineNo), lineID: id, kind: string(p.Kind),
		status: string(p.Status), reason: reason, rid: p.RID, room: p.BootstrapRoom, line: string(rec.Raw),
	})
	b.bytes += len(rec.Raw)
	for i := -1; i < len(p.More); i++ { // p, then the messages glued to it
		x := &p
		if i >= 0 {
			x = &p.More[i]
		}
		if x.Status != parse.StatusParsed {
			continue
		}
		xts := x.TS
		if xts.IsZero() {
			xts = ts
		}
		// The messages of one record share its line id; msg_index keeps
		// them apart in the tables' keys (migration 0017): 0 for the
		// primary, n for More[n-1], the same on every re-ingest.
		msg := uint8(i + 1)
		requestID := ""
		switch {
		case x.Engine != nil:
			b.engine = append(b.engine, engineRow{ts: xts, node: node, role: role, e: x.Engine, lineID: id, msgIndex: msg})
		case x.Batch != nil:
			b.batches = append(b.batches, batchRow{ts: xts, node: node, role: role, b: x.Batch, lineID: id, msgIndex: msg})
		case x.Transfer != nil:
			b.transfer = append(b.transfer, transferRow{ts: xts, node: node, role: role, t: x.Transfer, lineID: id, msgIndex: msg})
		case x.Gateway != nil:
			b.gateway = append(b.gateway, gatewayRow{ts: xts, node: node, g: x.Gateway, lineID: id})
			requestID = x.Gateway.RequestID
		case x.Page != nil:
			pn := x.Page.Node
			if pn == "" {
				pn = node
			}
			b.pages = append(b.pages, pageRow{ts: xts, node: pn, p: x.Page, lineID: id, msgIndex: msg})
		}
		for _, m := range x.Metrics {
			b.metrics = append(b.metrics, metricRow{node: node, m: m, source: r.path})
		}
		b.addIDs(node, xts, id, x.RID, x.BootstrapRoom, requestID)
	}
}

// addBoot records the current state of a boot; within a batch only its
// latest (most complete) version is kept.
func (r *sourceRun) addBoot(b *Batch, f parse.BootFacts) {
	ids := make([]uint64, len(f.Offsets))
	for i, off := range f.Offsets {
		ids[i] = LineID(r.sourceID, off)
	}
	row := bootRow{node: r.src.Node, role: r.src.Role, f: f, lineIDs: ids}
	for i := range b.boots {
		if b.boots[i].f.BootID == f.BootID {
			b.boots[i] = row
			return
		}
	}
	b.boots = append(b.boots, row)
}
