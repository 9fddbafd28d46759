package ingest

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// Options tune the pipeline. Zero values mean the defaults.
type Options struct {
	// BatchRecords flushes a batch after this many records (default 50,000).
	BatchRecords int
	// BatchBytes flushes a batch after this much raw text (default 32 MiB);
	// with BatchRecords it bounds memory.
	BatchBytes int
	// FlushInterval flushes a batch at least this often (default 2 s), so a
	// slow stream still reaches ClickHouse.
	FlushInterval time.Duration
	// Force re-ingests sources already recorded as complete.
	Force bool
	// Retries of a failed batch write before giving up (default 3).
	Retries int
	// Progress, if set, is told about bytes and records as they are read.
	Progress Progress
	Logger   *slog.Logger
	// TempDir receives the copy of stdin (default os.TempDir()).
	TempDir string
}

// Progress receives read progress.
type Progress interface {
	Start(path string, size int64)
	Add(bytes int64, records int64)
	Finish()
}

func (o *Options) defaults() {
	if o.BatchRecords <= 0 {
		o.BatchRecords = 50_000
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 32 << 20
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 2 * time.Second
	}
	if o.Retries <= 0 {
		o.Retries = 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Ingester writes sources into ClickHouse.
type Ingester struct {
	store Store
	opts  Options
}

// New returns an Ingester writing to store.
func New(store Store, opts Options) *Ingester {
	opts.defaults()
	return &Ingester{store: store, opts: opts}
}

// Counts are per-source or per-format record counters.
type Counts struct {
	Records   uint64 `json:"records"`
	Parsed    uint64 `json:"parsed"`
	Unknown   uint64 `json:"unknown"`
	Malformed uint64 `json:"malformed"`
	Bytes     uint64 `json:"bytes"`
}

func (c *Counts) add(o Counts) {
	c.Records += o.Records
	c.Parsed += o.Parsed
	c.Unknown += o.Unknown
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
	// State is ingested, skipped (already complete) or failed.
	State       string    `json:"state"`
	ResumedFrom int64     `json:"resumed_from,omitempty"`
	FirstTS     time.Time `json:"first_ts"`
	LastTS      time.Time `json:"last_ts"`
	Counts
	// MalformedReasons counts the most common reasons (capped).
	MalformedReasons map[string]uint64 `json:"malformed_reasons,omitempty"`
	Error            string            `json:"error,omitempty"`
}

// Summary is the result of an ingest run.
type Summary struct {
	Sources  []SourceResult    `json:"sources"`
	ByFormat map[string]Counts `json:"by_format"`
	Total    Counts            `json:"total"`
	Seconds  float64           `json:"seconds"`
}

// Ingest ingests every source in order. A failed source is recorded in the
// summary and the others still run; the returned error joins the failures.
func (in *Ingester) Ingest(ctx context.Context, sources []Source) (Summary, error) {
	start := time.Now()
	sum := Summary{ByFormat: map[string]Counts{}}
	var errs []error
	for _, src := range sources {
		res, err := in.IngestSource(ctx, src)
		if err != nil {
			res.State, res.Error = "failed", err.Error()
			errs = append(errs, fmt.Errorf("%s: %w", src.Path, err))
		}
		sum.Sources = append(sum.Sources, res)
		c := sum.ByFormat[res.Format]
		c.add(res.Counts)
		sum.ByFormat[res.Format] = c
		sum.Total.add(res.Counts)
		if ctx.Err() != nil {
			break
		}
	}
	sum.Seconds = time.Since(start).Seconds()
	return sum, errors.Join(errs...)
}

// singleLine formats are one record per physical line: a leading space
// there is data, not a traceback continuation.
func singleLine(f parse.Format) bool {
	switch f {
	case parse.FormatGateway, parse.FormatRequestMetrics, parse.FormatPageEvents, parse.FormatPrometheus, parse.FormatModelGateway:
		return true
	}
	return false
}

// IngestSource ingests one source, resuming from its checkpoint.
func (in *Ingester) IngestSource(ctx context.Context, src Source) (SourceResult, error) {
	res := SourceResult{Path: src.Path, Node: src.Node, Role: src.Role, Format: string(src.Format)}
	if err := src.Validate(); err != nil {
		return res, err
	}
	path, cleanup, err := in.materialize(src.Path)
	if err != nil {
		return res, err
	}
	defer cleanup()
	digest, size, err := fileDigest(path)
	if err != nil {
		return res, err
	}
	res.SourceID = digest
	cp, err := loadCheckpoint(ctx, in.store, digest)
	if err != nil {
		return res, err
	}
	if cp.Complete && !in.opts.Force {
		res.State, res.Format = "skipped", cp.Format
		res.Counts, res.FirstTS, res.LastTS = cp.Counts, cp.FirstTS, cp.LastTS
		in.opts.Logger.Info("source already ingested", slog.String("path", src.Path), slog.String("source_id", digest[:12]))
		return res, nil
	}
	if in.opts.Force {
		cp = checkpoint{}
	}

	format := src.Format
	if format == FormatAuto || format == "" {
		format, err = detect(path)
		if err != nil {
			return res, err
		}
	}
	res.Format = string(format)
	parser, err := parse.New(format, parse.ParseOptions{
		Location: src.Location, ClockOffset: src.ClockOffset, Year: src.Year,
		DefaultTime: modTime(path), Gateway: src.Gateway,
	})
	if err != nil {
		return res, err
	}

	f, err := os.Open(path)
	if err != nil {
		return res, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	counted := &countingReader{r: f}
	var stream io.Reader = bufio.NewReaderSize(counted, 256<<10)
	if isGzip(path) {
		gz, err := gzip.NewReader(stream)
		if err != nil {
			return res, fmt.Errorf("gunzip: %w", err)
		}
		defer gz.Close()
		stream = gz
	}
	if in.opts.Progress != nil {
		in.opts.Progress.Start(src.Path, size)
		defer in.opts.Progress.Finish()
	}

	run := &sourceRun{
		in: in, src: src, sourceID: digest, size: uint64(size), path: src.Path, format: format,
		parser: parser, counted: counted, cp: cp,
		reader: parse.NewReader(stream, parse.ReaderOptions{SingleLine: singleLine(format)}),
	}
	if len(src.Endpoints) > 0 {
		if err := saveNode(ctx, in.store, src); err != nil {
			return res, err
		}
	}
	if cp.Offset > 0 {
		res.ResumedFrom = int64(cp.Offset)
		in.opts.Logger.Info("resuming source", slog.String("path", src.Path), slog.Uint64("offset", cp.Offset))
	}
	err = run.run(ctx)
	// Seconds, as ingest_sources stores them: a resumed run reports the
	// same span as an uninterrupted one.
	res.Counts, res.FirstTS, res.LastTS = run.cp.Counts, run.cp.FirstTS.Truncate(time.Second), run.cp.LastTS.Truncate(time.Second)
	res.MalformedReasons = run.reasons
	if err != nil {
		return res, err
	}
	res.State = "ingested"
	return res, nil
}

// materialize returns a regular file path for src: stdin is copied to a
// temporary file first, because the digest (the source's identity, part of
// every line id) must be known before the first row is written.
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

func fileDigest(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("digest: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
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
			return "", fmt.Errorf("gunzip: %w", err)
		}
		defer gz.Close()
		r = gz
	}
	sample := make([]byte, parse.DetectSampleBytes)
	n, err := io.ReadFull(r, sample)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read sample: %w", err)
	}
	fmtd := parse.Detect(sample[:n])
	if fmtd == parse.FormatUnknown {
		return "", fmt.Errorf("cannot detect the format of %s (first bytes: %q); pass --format or set format in the manifest",
			filepath.Base(path), printable(sample[:min(n, 60)]))
	}
	return fmtd, nil
}

// printable makes a short sample safe for an error message: control bytes
// and invalid UTF-8 are escaped by %q.
func printable(b []byte) string { return strings.ToValidUTF8(string(b), "?") }

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
	in       *Ingester
	src      Source
	sourceID string
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
}

const maxReasons = 20

// run reads records, replays the already-committed prefix to rebuild parser
// and boot state without writing it, and streams the rest to ClickHouse
// through a writer goroutine (parsing and inserting overlap).
func (r *sourceRun) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type job struct {
		b  *Batch
		cp checkpoint
	}
	jobs := make(chan job, 1)
	free := make(chan *Batch, 2)
	free <- &Batch{}
	free <- &Batch{}
	werr := make(chan error, 1)
	go func() {
		var err error
		for j := range jobs {
			if err == nil {
				err = r.flush(ctx, j.b, j.cp)
				if err != nil {
					cancel()
				}
			}
			j.b.reset()
			free <- j.b
		}
		werr <- err
	}()

	resumeAt := int64(r.cp.Offset)
	counts := r.cp.Counts
	firstTS, lastTS := r.cp.FirstTS, r.cp.LastTS
	r.reasons = map[string]uint64{}
	b := <-free
	lastFlush := time.Now()
	var lastProgress int64
	send := func(final bool) bool {
		cp := checkpoint{
			SourceID: r.sourceID, Path: r.path, Node: r.src.Node, Role: r.src.Role, Format: string(r.format),
			Counts: counts, Offset: uint64(r.reader.Offset()), Size: r.size, Complete: final,
			FirstTS: firstTS, LastTS: lastTS,
		}
		cp.Counts.Bytes = cp.Offset
		r.cp = cp
		select {
		case jobs <- job{b: b, cp: cp}:
		case <-ctx.Done():
			return false
		}
		select {
		case b = <-free:
		case <-ctx.Done():
			return false
		}
		lastFlush = time.Now()
		return true
	}
	var readErr error
	for {
		rec, err := r.reader.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = fmt.Errorf("read at offset %d: %w", r.reader.Offset(), err)
			break
		}
		if p := r.in.opts.Progress; p != nil {
			p.Add(r.counted.n-lastProgress, 1)
			lastProgress = r.counted.n
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
			continue // committed before a crash: replayed for state only
		}
		counts.Records++
		switch parsed.Status {
		case parse.StatusParsed:
			counts.Parsed++
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
		if b.Len() >= r.in.opts.BatchRecords || b.bytes >= r.in.opts.BatchBytes || time.Since(lastFlush) >= r.in.opts.FlushInterval {
			if !send(false) {
				break
			}
		}
	}
	if readErr == nil && ctx.Err() == nil {
		send(true)
	}
	close(jobs)
	if err := <-werr; err != nil {
		return err
	}
	if readErr != nil {
		return readErr
	}
	return ctx.Err()
}

func (r *sourceRun) addRecord(b *Batch, rec parse.Record, p parse.Parsed, ts time.Time) {
	node, role := r.src.Node, r.src.Role
	id := LineID(r.sourceID, rec.Offset)
	reason := p.Reason
	if rec.Truncated {
		reason = strings.TrimSpace(reason + " (record truncated to the size cap)")
	}
	b.raw = append(b.raw, rawRow{
		ts: ts, node: node, role: role, format: string(r.format), source: r.path, digest: r.sourceID,
		offset: uint64(rec.Offset), lineNo: uint64(rec.LineNo), lineID: id, kind: string(p.Kind),
		status: string(p.Status), reason: reason, rid: p.RID, room: p.BootstrapRoom, line: string(rec.Raw),
	})
	b.bytes += len(rec.Raw)
	for _, x := range append([]parse.Parsed{p}, p.More...) {
		if x.Status != parse.StatusParsed {
			continue
		}
		xts := x.TS
		if xts.IsZero() {
			xts = ts
		}
		requestID := ""
		switch {
		case x.Engine != nil:
			b.engine = append(b.engine, engineRow{ts: xts, node: node, role: role, e: x.Engine, lineID: id})
		case x.Batch != nil:
			b.batches = append(b.batches, batchRow{ts: xts, node: node, role: role, b: x.Batch, lineID: id})
		case x.Transfer != nil:
			b.transfer = append(b.transfer, transferRow{ts: xts, node: node, role: role, t: x.Transfer, lineID: id})
		case x.Gateway != nil:
			b.gateway = append(b.gateway, gatewayRow{ts: xts, node: node, g: x.Gateway, lineID: id})
			requestID = x.Gateway.RequestID
		case x.Page != nil:
			pn := x.Page.Node
			if pn == "" {
				pn = node
			}
			b.pages = append(b.pages, pageRow{ts: xts, node: pn, p: x.Page, lineID: id})
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

// flush writes a batch and then its checkpoint, retrying transient failures.
// The checkpoint goes last: after a crash between the two, the rerun writes
// the same rows again under the same keys, which the tables fold together.
func (r *sourceRun) flush(ctx context.Context, b *Batch, cp checkpoint) error {
	var err error
	for attempt := 0; attempt <= r.in.opts.Retries; attempt++ {
		if attempt > 0 {
			wait := time.Duration(1<<(attempt-1)) * time.Second
			r.in.opts.Logger.Warn("retrying batch write", slog.String("path", r.path), slog.Int("attempt", attempt), slog.Duration("wait", wait), slog.String("error", err.Error()))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		if err = write(ctx, r.in.store, b); err != nil {
			continue
		}
		if err = saveCheckpoint(ctx, r.in.store, cp); err != nil {
			continue
		}
		return nil
	}
	return fmt.Errorf("write batch ending at offset %d: %w", cp.Offset, err)
}
