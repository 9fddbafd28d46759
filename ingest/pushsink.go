package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"log/slog"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
	"github.com/kvtrail/kvtrail/ingest/push"
	"github.com/kvtrail/kvtrail/ingest/spool"
)

// Spool is what PushSink needs from the durable spool (ingest/spool).
type Spool interface {
	Append(batch []byte) error
	DrainBatch(ctx context.Context, maxRecords int, maxBytes int64, deliver func(batch [][]byte) (int, error)) (int, error)
	Len() int
	Size() int64
}

// DeadLetter keeps spooled pushes that could not be stored (ingest/spool).
type DeadLetter interface {
	Append(batch []byte) error
	Len() int
	Size() int64
}

// PushSink is the push.Sink behind POST /loki/api/v1/push and
// /ingest/v1/lines.
//
// With a spool, the spool is a write-ahead log: Accept validates the
// entries, appends them to the spool (fsync'd, group-committed) and
// returns; it never waits for ClickHouse, so pushes keep being acknowledged
// at disk speed through an outage and while its backlog drains. One drain
// goroutine (RunDrain) writes the spool to ClickHouse oldest first, many
// pushes per write, so each stream is parsed in order. A spooled push that
// cannot be stored is retried and then quarantined in the dead letter
// (see deliver), so it never blocks the pushes behind it.
//
// Without a spool, Accept writes to ClickHouse itself and a failure is
// answered 503.
type PushSink struct {
	store    Store
	spool    Spool
	dead     DeadLetter
	log      *slog.Logger
	timeout  time.Duration
	maxTries int
	onDead   func(Quarantined)
	wake     chan struct{}

	mu      sync.Mutex // parsing state, the writes and the drain's own state below
	streams map[string]*pushStream
	// sources are the line sources this sink has stored (line_sources
	// rows go out once per stream, not per write).
	sources sourcesSeen
	limit   int               // records per drain batch, halved while isolating a failure
	tries   map[string]*tries // write failures per record (by content digest)
	// minAge is how long a push must have been failing before it is
	// quarantined, so that a ClickHouse that answers pings but refuses
	// writes for a while (too many parts, a replica catching up) does not
	// send healthy pushes to the dead letter.
	minAge time.Duration

	recentMu sync.Mutex    // not mu: Stats must not wait for a drain write
	recent   []Quarantined // last quarantined records, newest last

	headArrival  atomic.Int64 // unix ns of the oldest push not yet stored; 0 if none known
	drained      atomic.Int64 // pushes stored by the drain
	drainedLines atomic.Int64
	quarantined  atomic.Int64
}

type tries struct {
	n     int
	first time.Time
}

// Quarantined describes a spooled push moved to the dead letter.
type Quarantined struct {
	Time    time.Time `json:"time"`
	Entries int       `json:"entries"`
	Streams []string  `json:"streams"`
	Reason  string    `json:"reason"`
}

// Drain batch bounds: one ClickHouse write per batch. Large enough that a
// backlog drains at the ingest path's speed, small enough to bound memory.
const (
	drainMaxRecords = 4096
	drainMaxBytes   = 8 << 20
	// DefaultMaxTries is how often a spooled push is written before it is
	// quarantined, counting only attempts made while ClickHouse answered.
	DefaultMaxTries = 5
)

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
	cp       checkpoint
	loaded   bool
	lastUsed time.Time
	// noTS remembers when lines without a timestamp were first stored, by
	// line id, so that a client's retry stores them at the same time.
	noTS map[uint64]time.Time
	// uncounted holds ids of lines a failed write may have stored before
	// their counts were saved; the retry counts them although stored.
	uncounted map[uint64]bool
	// attrKeys/attrValues are the stream's labels and tenant as raw_lines
	// attributes, shared by its entries without structured metadata.
	attrKeys, attrValues []string
}

// PushOption configures a PushSink.
type PushOption func(*PushSink)

// WithDeadLetter sets where unstorable spooled pushes are kept. Without
// one they are still skipped after the tries, and logged, but not kept.
func WithDeadLetter(d DeadLetter) PushOption { return func(s *PushSink) { s.dead = d } }

// WithMaxTries sets how many failed writes quarantine a spooled push.
func WithMaxTries(n int) PushOption {
	return func(s *PushSink) {
		if n > 0 {
			s.maxTries = n
		}
	}
}

// WithQuarantineAfter sets how long a spooled push must have been failing
// (besides the tries) before it is quarantined (default 1 minute).
func WithQuarantineAfter(d time.Duration) PushOption { return func(s *PushSink) { s.minAge = d } }

// WithQuarantineHook is called (without locks held) for every push moved
// to the dead letter, e.g. to alert.
func WithQuarantineHook(f func(Quarantined)) PushOption { return func(s *PushSink) { s.onDead = f } }

// NewPushSink writes pushed entries to store through the spool sp. sp may
// be nil: then Accept writes directly and a ClickHouse failure is a 503.
func NewPushSink(store Store, sp Spool, log *slog.Logger, opts ...PushOption) *PushSink {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &PushSink{store: store, spool: sp, log: log, timeout: 30 * time.Second, maxTries: DefaultMaxTries,
		streams: map[string]*pushStream{}, limit: drainMaxRecords, tries: map[string]*tries{}, minAge: time.Minute, wake: make(chan struct{}, 1)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Accept implements push.Sink.
func (s *PushSink) Accept(ctx context.Context, entries []push.Entry) error {
	rec := pushRecord{entries: entries}
	rec.indexSets()
	if err := validateRecord(&rec); err != nil {
		return fmt.Errorf("%w: %v", push.ErrBadRequest, err)
	}
	now := time.Now().UTC()
	if s.spool == nil {
		rec.arrival = now
		s.mu.Lock()
		defer s.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		if _, err := s.writeRecords(wctx, []pushRecord{rec}); err != nil {
			return fmt.Errorf("%w: ClickHouse write failed and no spool is configured: %v", push.ErrUnavailable, err)
		}
		return nil
	}
	s.headArrival.CompareAndSwap(0, now.UnixNano())
	if err := s.spool.Append(encodeRecord(now, entries)); err != nil {
		if errors.Is(err, spool.ErrFull) {
			return fmt.Errorf("%w: %v", push.ErrUnavailable, err)
		}
		return fmt.Errorf("%w: spool append: %v", push.ErrUnavailable, err)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// validateRecord checks what a push must carry before it is acknowledged:
// times kvtrail can store, and per stream a node, a known role (or none)
// and a format the parsers know (or none, to detect it). Anything else
// could never be stored as evidence.
func validateRecord(rec *pushRecord) error {
	for i := range rec.entries {
		if err := push.CheckTime(rec.entries[i].Ts); err != nil {
			return err
		}
	}
	done := make([]bool, len(rec.sets))
	for i, j := range rec.set {
		if done[j] {
			continue
		}
		done[j] = true
		if err := validateLabels(rec.entries[i].Stream); err != nil {
			return err
		}
	}
	return nil
}

func validateLabels(m map[string]string) error {
	if firstLabel(m, nodeLabels...) == "" {
		return fmt.Errorf("stream %s has no node label (node, host, hostname, instance or pod)", quoteLabels(m))
	}
	if r := m["role"]; r != "" && !contains(Roles, r) {
		return fmt.Errorf("stream %s: role %q is not one of %s", quoteLabels(m), r, strings.Join(Roles, ", "))
	}
	if f := NormalizeFormat(m["format"]); f != FormatAuto {
		if _, err := parse.New(f, parse.ParseOptions{}); err != nil {
			names := make([]string, len(parse.Formats))
			for i, x := range parse.Formats {
				names[i] = string(x)
			}
			return fmt.Errorf("stream %s: format %q is unknown (want one of auto, mooncake, gateway, %s)", quoteLabels(m), m["format"], strings.Join(names, ", "))
		}
	}
	return nil
}

var nodeLabels = []string{"node", "host", "hostname", "instance", "pod"}

// quoteLabels renders labels for an error message, cut short.
func quoteLabels(m map[string]string) string {
	l := labelString(m)
	if len(l) > 200 {
		l = l[:200] + "…"
	}
	return l
}

// RunDrain drains the spool until ctx ends: at once when a push arrives,
// otherwise every idle. After a failure it waits (0.25 s doubling to 5 s)
// before trying again.
func (s *PushSink) RunDrain(ctx context.Context, idle time.Duration) {
	if s.spool == nil {
		return
	}
	backoff := time.Duration(0)
	t := time.NewTicker(idle)
	defer t.Stop()
	for {
		n, err := s.drainOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			backoff = min(max(2*backoff, 250*time.Millisecond), 5*time.Second)
			s.log.Warn("spool drain paused", slog.String("error", err.Error()), slog.Duration("retry_in", backoff))
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		case n > 0:
			backoff = 0
		default:
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
			case <-t.C:
			}
		}
	}
}

// Drain writes spooled pushes until the spool is empty or a write fails,
// and returns how many were consumed (stored or quarantined).
func (s *PushSink) Drain(ctx context.Context) (int, error) {
	if s.spool == nil {
		return 0, nil
	}
	total := 0
	for {
		n, err := s.drainOnce(ctx)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

func (s *PushSink) drainOnce(ctx context.Context) (int, error) {
	s.mu.Lock()
	limit := s.limit
	s.mu.Unlock()
	n, err := s.spool.DrainBatch(ctx, limit, drainMaxBytes, func(recs [][]byte) (int, error) {
		return s.deliver(ctx, recs)
	})
	if s.spool.Len() == 0 {
		s.headArrival.Store(0)
	}
	return n, err
}

// deliver stores a batch of spooled pushes and says how many of the
// leading ones are done with (stored or quarantined).
//
// A push that cannot even be decoded or validated is quarantined at once:
// no retry can change it. A write failure is retried, but only counts
// against the pushes written when ClickHouse answers a ping (an outage is
// not the pushes' fault): the batch is halved until the failing push is
// alone, and a push that fails alone maxTries times is quarantined.
func (s *PushSink) deliver(ctx context.Context, raws [][]byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := make([]pushRecord, 0, len(raws))
	for i, raw := range raws {
		rec, err := decodeRecord(raw)
		if err == nil {
			err = validateRecord(&rec)
		}
		if err != nil {
			if i > 0 {
				break // store the good ones before it first
			}
			q := s.quarantine(raw, rec, fmt.Sprintf("cannot be stored: %v", err))
			s.unlock(func() { s.notify(q) })
			return 1, nil
		}
		recs = append(recs, rec)
	}
	wctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	lines, err := s.writeRecords(wctx, recs)
	if err == nil {
		if len(s.tries) > 0 {
			for _, raw := range raws[:len(recs)] {
				delete(s.tries, recordKey(raw))
			}
		}
		s.limit = min(drainMaxRecords, 2*s.limit)
		s.drained.Add(int64(len(recs)))
		s.drainedLines.Add(int64(lines))
		// What is left arrived after the last push stored: its age bounds
		// the lag (drainOnce clears it when the spool is empty).
		if a := recs[len(recs)-1].arrival; !a.IsZero() {
			s.headArrival.Store(a.UnixNano())
		}
		return len(recs), nil
	}
	if ctx.Err() != nil || !s.reachable(ctx) {
		return 0, err // an outage: nobody's fault, try again later
	}
	if len(recs) > 1 {
		s.limit = max(1, len(recs)/2)
		return 0, err
	}
	k := recordKey(raws[0])
	tr := s.tries[k]
	if tr == nil {
		tr = &tries{first: time.Now()}
		s.tries[k] = tr
	}
	tr.n++
	if tr.n < s.maxTries || time.Since(tr.first) < s.minAge {
		return 0, fmt.Errorf("write failed (try %d, quarantined after %d and %s): %w", tr.n, s.maxTries, s.minAge, err)
	}
	delete(s.tries, k)
	q := s.quarantine(raws[0], recs[0], fmt.Sprintf("write failed %d times over %s while ClickHouse answered: %v",
		tr.n, time.Since(tr.first).Round(time.Second), err))
	s.unlock(func() { s.notify(q) })
	return 1, nil
}

// unlock runs f with s.mu released (deliver holds it).
func (s *PushSink) unlock(f func()) {
	s.mu.Unlock()
	defer s.mu.Lock()
	f()
}

func (s *PushSink) notify(q Quarantined) {
	if s.onDead != nil {
		s.onDead(q)
	}
}

// quarantine moves one spooled push to the dead letter. mu held.
func (s *PushSink) quarantine(raw []byte, rec pushRecord, reason string) Quarantined {
	q := Quarantined{Time: time.Now().UTC(), Entries: len(rec.entries), Reason: reason}
	seen := map[string]bool{}
	for i := range rec.entries {
		if l := labelString(rec.entries[i].Stream); !seen[l] && len(q.Streams) < 10 {
			seen[l] = true
			q.Streams = append(q.Streams, l)
		}
	}
	kept := "not kept (no dead letter configured)"
	if s.dead != nil {
		if err := s.dead.Append(encodeDead(q, raw)); err != nil {
			kept = "NOT kept: " + err.Error()
		} else {
			kept = "kept in the dead letter"
		}
	}
	s.quarantined.Add(1)
	s.recentMu.Lock()
	s.recent = append(s.recent, q)
	if len(s.recent) > 100 {
		s.recent = s.recent[1:]
	}
	s.recentMu.Unlock()
	s.log.Error("spooled push quarantined", slog.String("reason", reason), slog.Int("entries", q.Entries),
		slog.String("streams", strings.Join(q.Streams, " ")), slog.String("record", kept))
	return q
}

// encodeDead frames a dead-letter record: the reason as JSON, then the
// spooled push exactly as it was.
func encodeDead(q Quarantined, raw []byte) []byte {
	meta, _ := json.Marshal(q)
	b := binary.AppendUvarint(nil, uint64(len(meta)))
	b = append(b, meta...)
	return append(b, raw...)
}

// DecodeDead splits a dead-letter record into its reason and the spooled
// push, for replaying it (PushSink.Requeue).
func DecodeDead(b []byte) (Quarantined, []byte, error) {
	var q Quarantined
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return q, nil, errCorruptRecord
	}
	if err := json.Unmarshal(b[k:k+int(n)], &q); err != nil {
		return q, nil, fmt.Errorf("dead-letter record: %w", err)
	}
	return q, b[k+int(n):], nil
}

func recordKey(raw []byte) string {
	sum := sha256.Sum256(raw)
	return string(sum[:16])
}

// reachable pings ClickHouse briefly. mu held.
func (s *PushSink) reachable(ctx context.Context) bool {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return s.store.Ping(pctx) == nil
}

// Requeue moves every dead-letter record of from back into the spool, to
// be stored again (after the cause was fixed), and returns how many.
func (s *PushSink) Requeue(ctx context.Context, from Spool) (int, error) {
	if s.spool == nil {
		return 0, errors.New("no spool configured")
	}
	total := 0
	for {
		n, err := from.DrainBatch(ctx, 256, 16<<20, func(recs [][]byte) (int, error) {
			for i, b := range recs {
				_, raw, err := DecodeDead(b)
				if err != nil {
					return i, err
				}
				if err := s.spool.Append(raw); err != nil {
					return i, err
				}
			}
			return len(recs), nil
		})
		total += n
		if err != nil || n == 0 {
			if total > 0 {
				select {
				case s.wake <- struct{}{}:
				default:
				}
			}
			return total, err
		}
	}
}

// PushStats is the spool's state for /metrics, /readyz and the status API.
type PushStats struct {
	SpoolRecords      int           `json:"spool_records"`
	SpoolBytes        int64         `json:"spool_bytes"`
	DrainLagSeconds   float64       `json:"drain_lag_seconds"`
	Drained           int64         `json:"drained_pushes"`
	DrainedLines      int64         `json:"drained_lines"`
	Quarantined       int64         `json:"quarantined_pushes"`
	DeadLetterRecords int           `json:"dead_letter_records"`
	DeadLetterBytes   int64         `json:"dead_letter_bytes"`
	Recent            []Quarantined `json:"recent_quarantined,omitempty"`
}

// Stats reports the spool's backlog and the drain's progress. The drain
// lag is the age of the oldest acknowledged push not yet in ClickHouse.
func (s *PushSink) Stats() PushStats {
	var st PushStats
	if s.spool != nil {
		st.SpoolRecords, st.SpoolBytes = s.spool.Len(), s.spool.Size()
		if ns := s.headArrival.Load(); ns > 0 && st.SpoolRecords > 0 {
			st.DrainLagSeconds = time.Since(time.Unix(0, ns)).Seconds()
		}
	}
	st.Drained, st.DrainedLines, st.Quarantined = s.drained.Load(), s.drainedLines.Load(), s.quarantined.Load()
	if s.dead != nil {
		st.DeadLetterRecords, st.DeadLetterBytes = s.dead.Len(), s.dead.Size()
	}
	s.recentMu.Lock()
	st.Recent = append([]Quarantined(nil), s.recent...)
	s.recentMu.Unlock()
	return st
}

// writeRecords parses and writes the pushes' entries, then the streams'
// accounting, and returns how many lines were written. The streams'
// counters change only once both writes succeeded, so a failed attempt
// that is retried is not counted twice. mu held.
func (s *PushSink) writeRecords(ctx context.Context, recs []pushRecord) (int, error) {
	// Streams are parsed in parallel, each stream's entries in order by
	// one worker: parsing state is per stream, so nothing is shared.
	workers := min(runtime.GOMAXPROCS(0), 4)
	items := make([][]pushItem, workers)
	workerOf := map[*pushStream]int{}
	lines := 0
	for _, rec := range recs {
		ids := noTSIdentities(rec.entries)
		streams := make([]*pushStream, len(rec.sets))
		for i, e := range rec.entries {
			j := rec.set[i]
			st := streams[j]
			if st == nil {
				var err error
				if st, err = s.stream(ctx, e, rec.sets[j]); err != nil {
					return 0, err
				}
				streams[j] = st
			}
			w, ok := workerOf[st]
			if !ok {
				w = len(workerOf) % workers
				workerOf[st] = w
			}
			items[w] = append(items[w], pushItem{st: st, e: e, id: ids[i]})
			lines++
		}
	}
	batches := make([]Batch, workers)
	accs := make([]*accounting, workers)
	var wg sync.WaitGroup
	for w := range items {
		accs[w] = newAccounting()
		if len(items[w]) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, it := range items[w] {
				s.addEntry(&batches[w], accs[w], it.st, it.e, it.id)
			}
		}()
	}
	wg.Wait()
	b := batches[0]
	acc := accs[0]
	for w := 1; w < workers; w++ {
		b.merge(&batches[w])
		acc.merge(accs[w])
	}
	if err := acc.dropStored(ctx, s.store); err != nil {
		return 0, err
	}
	if err := write(ctx, s.store, &b, &s.sources); err != nil {
		acc.failed()
		return 0, err
	}
	cps := acc.checkpoints()
	if err := saveCheckpoints(ctx, s.store, cps); err != nil {
		acc.failed()
		return 0, err
	}
	acc.commit()
	return lines, nil
}

// stream returns the parsing state of e's stream, creating it on first sight.
func (s *PushSink) stream(ctx context.Context, e push.Entry, labels string) (*pushStream, error) {
	key := e.Tenant + "\x00" + labels
	st := s.streams[key]
	if st == nil {
		if len(s.streams) >= maxStreams {
			s.evict()
		}
		sum := sha256.Sum256([]byte(key))
		st = &pushStream{id: "push:" + hex.EncodeToString(sum[:16]), labels: labels}
		st.node = firstLabel(e.Stream, nodeLabels...)
		if st.node == "" {
			st.node = "unknown"
		}
		st.role = firstLabel(e.Stream, "role")
		st.format = NormalizeFormat(firstLabel(e.Stream, "format"))
		st.attrKeys, st.attrValues = attrs(push.Entry{Stream: e.Stream, Tenant: e.Tenant})
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

// pushItem is one entry to parse, with its stream and timeless identity.
type pushItem struct {
	st *pushStream
	e  push.Entry
	id int64
}

// merge appends o's rows to b.
func (b *Batch) merge(o *Batch) {
	b.raw = append(b.raw, o.raw...)
	b.ids = append(b.ids, o.ids...)
	b.boots = append(b.boots, o.boots...)
	b.engine = append(b.engine, o.engine...)
	b.batches = append(b.batches, o.batches...)
	b.transfer = append(b.transfer, o.transfer...)
	b.gateway = append(b.gateway, o.gateway...)
	b.metrics = append(b.metrics, o.metrics...)
	b.pages = append(b.pages, o.pages...)
	b.bytes += o.bytes
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

// noTSIdentities gives the entries sent without a timestamp an identity
// that does not depend on when they arrived: their stream, their text,
// their place among the stream's timeless entries in this push, and a
// digest of all of those entries. A client retrying the same push gets
// the same identities; a different push does not, even when some of its
// lines are equal. 0 for entries with a timestamp.
func noTSIdentities(entries []push.Entry) []int64 {
	ids := make([]int64, len(entries))
	type acc struct {
		h   hash.Hash
		idx []int
	}
	var per map[string]*acc
	for i := range entries {
		if !entries[i].NoTS {
			continue
		}
		if per == nil {
			per = map[string]*acc{}
		}
		k := entries[i].Tenant + "\x00" + labelString(entries[i].Stream)
		a := per[k]
		if a == nil {
			a = &acc{h: sha256.New()}
			_, _ = a.h.Write([]byte(k))
			per[k] = a
		}
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(entries[i].Line)))
		_, _ = a.h.Write(n[:])
		_, _ = a.h.Write([]byte(entries[i].Line))
		a.idx = append(a.idx, i)
	}
	for _, a := range per {
		digest := a.h.Sum(nil)
		for ord, i := range a.idx {
			h := fnv.New64a()
			_, _ = h.Write([]byte("nots\x00"))
			_, _ = h.Write(digest)
			var n [8]byte
			binary.LittleEndian.PutUint64(n[:], uint64(ord))
			_, _ = h.Write(n[:])
			_, _ = h.Write([]byte(entries[i].Line))
			ids[i] = int64(h.Sum64() & math.MaxInt64)
		}
	}
	return ids
}

// noTSWindow is how long the arrival time of a timeless line is remembered
// for a retry of its push; noTSMax bounds it per stream.
const (
	noTSWindow = 15 * time.Minute
	noTSMax    = 100_000
)

func (s *PushSink) addEntry(b *Batch, acc *accounting, st *pushStream, e push.Entry, noTSID int64) {
	off := pushOffset(e)
	if e.NoTS {
		// Stored at the time the push first arrived, so that a retry
		// writes the same row (same key) instead of a second one.
		off = noTSID
		id := LineID(st.id, off)
		if t, ok := st.noTS[id]; ok {
			e.Ts = t
		} else {
			if st.noTS == nil || len(st.noTS) >= noTSMax {
				st.noTS = pruneNoTS(st.noTS, e.Ts)
			}
			st.noTS[id] = e.Ts
		}
	}
	rec := parse.Record{Offset: off, Length: int64(len(e.Line)), Lines: 1, Raw: []byte(e.Line)}
	p := safeParse(st.parser, rec)
	checkParsedTimes(&p)
	ts := p.TS
	if ts.IsZero() {
		ts = e.Ts // the shipper's timestamp when the line carries none
	}
	bf, bootChanged := st.boots.Observe(p, off)
	st.run.addRecord(b, rec, p, ts)
	raw := &b.raw[len(b.raw)-1]
	raw.line = e.Line // the same bytes; drops addRecord's copy at once
	if len(e.Metadata) == 0 {
		raw.attrKeys, raw.attrValues = st.attrKeys, st.attrValues // shared, read-only
	} else {
		raw.attrKeys, raw.attrValues = attrs(e)
	}
	if bootChanged {
		st.run.addBoot(b, bf)
	}
	acc.add(st, LineID(st.id, off), ts, p.Status, uint64(len(e.Line)))
}

func pruneNoTS(m map[uint64]time.Time, now time.Time) map[uint64]time.Time {
	if m == nil {
		return map[uint64]time.Time{}
	}
	for id, t := range m {
		if now.Sub(t) > noTSWindow {
			delete(m, id)
		}
	}
	if len(m) >= noTSMax {
		return map[uint64]time.Time{}
	}
	return m
}

// checkParsedTimes keeps a line whose own timestamp cannot be stored
// (before 1970, after 2105) as malformed evidence with the reason, at the
// push's time, instead of storing a clamped, wrong time as if it were right.
func checkParsedTimes(p *parse.Parsed) {
	bad := func(x *parse.Parsed) {
		if x.TS.IsZero() {
			return
		}
		if err := push.CheckTime(x.TS); err != nil {
			x.Status, x.Reason, x.TS = parse.StatusMalformed, "line "+err.Error()+"; stored at the push's time", time.Time{}
		}
	}
	bad(p)
	for i := range p.More {
		bad(&p.More[i])
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
