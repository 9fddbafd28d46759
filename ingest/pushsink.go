package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
	"github.com/kvtrail/kvtrail/ingest/push"
	"github.com/kvtrail/kvtrail/ingest/spool"
)

// Spool is what PushSink needs from the durable spool (ingest/spool).
type Spool interface {
	Append(batch []byte) error
	Drain(ctx context.Context, deliver func(batch []byte) error) (int, error)
	Len() int
}

// PushSink is the push.Sink behind POST /loki/api/v1/push and
// /ingest/v1/lines. Accept returns only once the entries are in ClickHouse
// or fsync'd in the spool, which is what lets the handler acknowledge them.
// While the spool holds anything, new pushes are spooled behind it so that
// each stream is parsed in order.
type PushSink struct {
	store   Store
	spool   Spool
	log     *slog.Logger
	timeout time.Duration

	mu      sync.Mutex // parsing state and the spool-or-write decision
	streams map[string]*pushStream
}

// maxStreams bounds per-stream parser state; beyond it the least recently
// used stream is forgotten (its parser restarts, its counts reload).
const maxStreams = 10_000

type pushStream struct {
	id       string
	labels   string
	node     string
	role     string
	format   parse.Format
	parser   parse.Parser
	boots    parse.BootTracker
	run      sourceRun // row building for this stream, set with the parser
	lastTS   time.Time
	cp       checkpoint
	loaded   bool
	lastUsed time.Time
}

// NewPushSink writes pushed entries to store, spooling them when it fails.
// sp may be nil: then a ClickHouse failure is answered with 503 directly.
func NewPushSink(store Store, sp Spool, log *slog.Logger) *PushSink {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PushSink{store: store, spool: sp, log: log, timeout: 15 * time.Second, streams: map[string]*pushStream{}}
}

// Accept implements push.Sink.
func (s *PushSink) Accept(ctx context.Context, entries []push.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spool != nil && s.spool.Len() > 0 {
		return s.toSpool(entries, errors.New("spool not yet drained"))
	}
	wctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := s.writeEntries(wctx, entries)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: client went away", push.ErrUnavailable)
	}
	return s.toSpool(entries, err)
}

func (s *PushSink) toSpool(entries []push.Entry, cause error) error {
	if s.spool == nil {
		return fmt.Errorf("%w: ClickHouse write failed and no spool is configured: %v", push.ErrUnavailable, cause)
	}
	var buf bytes.Buffer
	// gob keeps strings as raw bytes: invalid UTF-8 in a line survives.
	if err := gob.NewEncoder(&buf).Encode(entries); err != nil {
		return fmt.Errorf("encode entries for spool: %w", err)
	}
	if err := s.spool.Append(buf.Bytes()); err != nil {
		if errors.Is(err, spool.ErrFull) {
			return fmt.Errorf("%w: ClickHouse unavailable (%v) and %v", push.ErrUnavailable, cause, err)
		}
		return fmt.Errorf("%w: spool append: %v", push.ErrUnavailable, err)
	}
	s.log.Warn("push spooled", slog.Int("entries", len(entries)), slog.String("cause", cause.Error()))
	return nil
}

// Drain writes spooled pushes to ClickHouse, oldest first, and stops at the
// first failure (the rest stays spooled). It returns how many were written.
func (s *PushSink) Drain(ctx context.Context) (int, error) {
	if s.spool == nil {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spool.Drain(ctx, func(b []byte) error {
		var entries []push.Entry
		if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&entries); err != nil {
			// A record that passed the spool's CRC but does not decode
			// was written by an incompatible kvtrail; skipping it would
			// lose data silently, so keep it and report.
			return fmt.Errorf("decode spooled push: %w", err)
		}
		wctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		return s.writeEntries(wctx, entries)
	})
}

// RunDrain drains the spool every interval until ctx ends.
func (s *PushSink) RunDrain(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.spool == nil || s.spool.Len() == 0 {
			continue
		}
		n, err := s.Drain(ctx)
		if n > 0 {
			s.log.Info("drained spooled pushes", slog.Int("batches", n))
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("spool drain paused", slog.String("error", err.Error()))
		}
	}
}

// writeEntries parses and writes entries, then the streams' accounting.
func (s *PushSink) writeEntries(ctx context.Context, entries []push.Entry) error {
	var b Batch
	touched := map[*pushStream]bool{}
	for _, e := range entries {
		st, err := s.stream(ctx, e)
		if err != nil {
			return err
		}
		touched[st] = true
		s.addEntry(&b, st, e)
	}
	if err := write(ctx, s.store, &b); err != nil {
		return err
	}
	cps := make([]checkpoint, 0, len(touched))
	for st := range touched {
		cps = append(cps, st.cp)
	}
	return saveCheckpoints(ctx, s.store, cps)
}

// stream returns the parsing state of e's stream, creating it on first sight.
func (s *PushSink) stream(ctx context.Context, e push.Entry) (*pushStream, error) {
	labels := labelString(e.Stream)
	key := e.Tenant + "\x00" + labels
	st := s.streams[key]
	if st == nil {
		if len(s.streams) >= maxStreams {
			s.evict()
		}
		sum := sha256.Sum256([]byte(key))
		st = &pushStream{id: "push:" + hex.EncodeToString(sum[:16]), labels: labels}
		st.node = firstLabel(e.Stream, "node", "host", "hostname", "instance", "pod")
		if st.node == "" {
			st.node = "unknown"
		}
		st.role = firstLabel(e.Stream, "role")
		st.format = NormalizeFormat(firstLabel(e.Stream, "format"))
		s.streams[key] = st
	}
	st.lastUsed = time.Now()
	if st.parser == nil {
		f := st.format
		if f == FormatAuto {
			f = parse.Detect([]byte(e.Line + "\n"))
			if f == parse.FormatUnknown {
				f = parse.FormatSGLang // kept as evidence; unknown lines stay "unknown"
			}
		}
		p, err := parse.NewClassifier(f, parse.ParseOptions{DefaultTime: e.Ts}) // each pushed line by its own shape
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", labels, err)
		}
		st.format, st.parser = f, p
		st.run = sourceRun{src: Source{Node: st.node, Role: st.role}, sourceID: st.id, path: st.labels, format: f}
	}
	if !st.loaded {
		cp, err := loadCheckpoint(ctx, s.store, st.id)
		if err != nil {
			return nil, err
		}
		st.cp, st.loaded = cp, true
		st.cp.Path, st.cp.Node, st.cp.Role, st.cp.Format = labels, st.node, st.role, string(st.format)
	}
	return st, nil
}

func (s *PushSink) evict() {
	var oldest string
	var t time.Time
	for k, st := range s.streams {
		if oldest == "" || st.lastUsed.Before(t) {
			oldest, t = k, st.lastUsed
		}
	}
	delete(s.streams, oldest)
}

// pushOffset stands in for a byte offset: pushed lines have none, so their
// identity is the entry's timestamp and text. Two pushes of the same entry
// (a client retry, an overlapping shipper) get the same line id.
func pushOffset(e push.Entry) int64 {
	h := fnv.New64a()
	var b [8]byte
	ns := e.Ts.UnixNano()
	for i := range b {
		b[i] = byte(ns >> (8 * i))
	}
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(e.Line))
	return int64(h.Sum64() & math.MaxInt64)
}

func (s *PushSink) addEntry(b *Batch, st *pushStream, e push.Entry) {
	off := pushOffset(e)
	rec := parse.Record{Offset: off, Length: int64(len(e.Line)), Lines: 1, Raw: []byte(e.Line)}
	p := safeParse(st.parser, rec)
	ts := p.TS
	if ts.IsZero() {
		ts = e.Ts // the shipper's timestamp when the line carries none
	}
	st.lastTS = ts
	bf, bootChanged := st.boots.Observe(p, off)
	st.run.addRecord(b, rec, p, ts)
	raw := &b.raw[len(b.raw)-1]
	raw.attrKeys, raw.attrValues = attrs(e)
	if bootChanged {
		st.run.addBoot(b, bf)
	}
	c := &st.cp.Counts
	c.Records++
	switch p.Status {
	case parse.StatusParsed:
		c.Parsed++
	case parse.StatusMalformed:
		c.Malformed++
	case parse.StatusNoise:
		c.Noise++
	default:
		c.Unknown++
	}
	c.Bytes += uint64(len(e.Line))
	if st.cp.FirstTS.IsZero() || ts.Before(st.cp.FirstTS) {
		st.cp.FirstTS = ts
	}
	if ts.After(st.cp.LastTS) {
		st.cp.LastTS = ts
	}
}

func safeParse(p parse.Parser, rec parse.Record) (out parse.Parsed) {
	defer func() {
		if x := recover(); x != nil {
			out = parse.Parsed{Status: parse.StatusMalformed, Reason: "parser panic (bug in kvtrail; line kept as evidence)"}
		}
	}()
	return p.Parse(rec)
}

// attrs flattens stream labels, structured metadata and the tenant into the
// raw line's attribute arrays, sorted for stable rows.
func attrs(e push.Entry) ([]string, []string) {
	type kv struct{ k, v string }
	var all []kv
	for k, v := range e.Stream {
		all = append(all, kv{"label." + k, v})
	}
	for k, v := range e.Metadata {
		all = append(all, kv{"meta." + k, v})
	}
	if e.Tenant != "" {
		all = append(all, kv{"tenant", e.Tenant})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].k < all[j].k })
	keys, vals := make([]string, len(all)), make([]string, len(all))
	for i, x := range all {
		keys[i], vals[i] = x.k, x.v
	}
	return keys, vals
}

func labelString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	sb.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s=%q", k, m[k])
	}
	sb.WriteByte('}')
	return sb.String()
}

func firstLabel(m map[string]string, names ...string) string {
	for _, n := range names {
		if v := m[n]; v != "" {
			return v
		}
	}
	return ""
}
