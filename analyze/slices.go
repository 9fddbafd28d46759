package analyze

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// Analysis in bounded memory. A window of more requests than
// Config.SliceRequests is read slice by slice, in time order: each slice
// loads its own requests plus the requests within sliceContext of it (so
// that what an analyzer looks up next to a request — the aborted room of a
// candidate, the other room of a metadata slot — is there), and the engine
// and transfer lines LinkMargin beyond those, links them, saves them to
// request_facts and hands them to each analyzer's pass. What an analyzer
// needs across the whole window is either a small sum it keeps (prompts in
// a boot's gap, routed-but-unlogged counts, abort candidates) or read back
// from ClickHouse after the slices (the speed fit's points, grouped by the
// server; the victims, writers and neighbours the reconstruction names,
// linked again from the lines their saved facts point at). The allocator
// replay already streams node by node from the store. A window that fits
// in one slice is read exactly as before, in one piece; the slices of a
// larger window give the same findings and the same notification list
// (TestSlicedAnalysisEqualsWhole).

// DefaultSliceRequests is the most gateway responses one slice holds by
// default: about 0.5 GB of linked requests and their lines in Go.
const DefaultSliceRequests = 100_000

// sliceContext is how far around its own span a slice links requests for
// lookups: an aborted request is at most the transfer timeout before the
// abort, its candidates AbortReuseWindow around it.
func (c Config) sliceContext() time.Duration {
	return waitingTimeout + max(c.AbortReuseWindow, time.Minute) + time.Minute
}

// sliceStep is the granularity slices are cut at.
const sliceStep = time.Minute

// pass is one analyzer's work over a window read in slices: slice sees
// each slice's Dataset in time order (its Facts are the slice's own
// requests) and returns the findings it can make there; finish runs once
// on the window's Dataset after the last slice.
type pass interface {
	slice(ctx context.Context, d *Dataset) ([]Finding, error)
	finish(ctx context.Context, d *Dataset) ([]Finding, error)
}

// passer is an analyzer with a pass of its own; any other analyzer works
// slice by slice (Analyze on each slice).
type passer interface {
	newPass() pass
}

func passOf(a Analyzer) pass {
	if p, ok := a.(passer); ok {
		return p.newPass()
	}
	return slicePass{a}
}

// slicePass runs a per-request analyzer on each slice.
type slicePass struct{ a Analyzer }

func (p slicePass) slice(ctx context.Context, d *Dataset) ([]Finding, error) {
	return p.a.Analyze(ctx, d)
}
func (slicePass) finish(context.Context, *Dataset) ([]Finding, error) { return nil, nil }

// windowPass runs once, after the slices, on what the store holds.
type windowPass func(ctx context.Context, d *Dataset) ([]Finding, error)

func (windowPass) slice(context.Context, *Dataset) ([]Finding, error) { return nil, nil }
func (p windowPass) finish(ctx context.Context, d *Dataset) ([]Finding, error) {
	return p(ctx, d)
}

// runPass is Analyze for an analyzer with a pass: a dataset read whole is
// its only slice.
func runPass(ctx context.Context, p pass, d *Dataset) ([]Finding, error) {
	fs, err := p.slice(ctx, d)
	if err != nil {
		return nil, err
	}
	more, err := p.finish(ctx, d)
	if err != nil {
		return nil, err
	}
	return append(fs, more...), nil
}

// owns reports whether a finding dated t belongs to this slice: the first
// and last slices also own what lies before and after the window, so each
// finding is kept by exactly one slice.
func (d *Dataset) owns(t time.Time) bool {
	if d.own == nil {
		return true
	}
	if d.own.From.After(d.Window.From) && t.Before(d.own.From) {
		return false
	}
	if d.own.To.Before(d.Window.To) && !t.Before(d.own.To) {
		return false
	}
	return true
}

// keep retains, on the window's Dataset, the summaries of the requests a
// slice's victim findings name, so the conclusions find them without
// reading them again. A summary, not the request: the conclusions read a
// victim's finding fields, tenant, model and decode side, not its rows,
// and the rows were most of the window's growth with its victims (about
// 35 MB of 18,777 requests at 10M). Other findings' requests are not
// kept: they are the most of the findings (abort_reuse's low leads) and
// would make the window's memory grow with them.
func (d *Dataset) keep(analyzer string, fs []Finding) {
	wd := d.parent
	if wd == nil {
		return
	}
	put := func(k string) {
		if f := d.ByKey[k]; f != nil && wd.kept[k] == nil {
			wd.keepSummary(f)
		}
	}
	for i := range fs {
		f := &fs[i]
		if !marksVictim(analyzer, f) {
			continue
		}
		put(f.RequestKey)
		for _, k := range f.ForeignRequestKeys {
			put(k)
		}
	}
}

// keepSummary keeps f's summary, by key and by room (a room's latest).
func (d *Dataset) keepSummary(f *Fact) {
	if d.kept == nil {
		d.kept, d.keptRooms = map[string]*domain.RequestSummary{}, map[uint64]*domain.RequestSummary{}
	}
	s := f.Summary()
	d.kept[f.Key] = &s
	if f.Room != 0 {
		d.keptRooms[f.Room] = &s
	}
}

// request is what the window knows of the request with this key: the
// summary a slice kept or a conclusion read back, else the summary of the
// request it holds whole; nil when neither.
func (d *Dataset) request(key string) *domain.RequestSummary { return known(d.kept, d.ByKey, key) }

// requestIn is request for the request of a bootstrap room.
func (d *Dataset) requestIn(room uint64) *domain.RequestSummary {
	return known(d.keptRooms, d.ByRoom, room)
}

// known is k's summary in kept, else the summary of its request in whole.
func known[K comparable](kept map[K]*domain.RequestSummary, whole map[K]*Fact, k K) *domain.RequestSummary {
	if s := kept[k]; s != nil {
		return s
	}
	if f := whole[k]; f != nil {
		s := f.Summary()
		return &s
	}
	return nil
}

func (d *Dataset) remember(f *Fact) {
	d.ByKey[f.Key] = f
	if f.Room != 0 {
		d.ByRoom[f.Room] = f
	}
}

// ensureRequests makes sure the window's Dataset knows (request,
// requestIn) the requests of these keys and rooms that this run saved
// (when it holds only some): it reads their saved facts' lines back,
// links them again and keeps their summaries. A request the run did not
// save (outside the window) stays unknown, as when the window is read
// whole.
func (d *Dataset) ensureRequests(ctx context.Context, keys []string, rooms []uint64) error {
	return d.readBack(ctx, keys, rooms,
		func(k string) bool { return d.kept[k] != nil || d.ByKey[k] != nil },
		func(r uint64) bool { return d.keptRooms[r] != nil || d.ByRoom[r] != nil },
		func(f *Fact) {
			if d.kept[f.Key] == nil {
				d.keepSummary(f)
			}
		})
}

// ensureFacts is ensureRequests for a caller that needs the requests
// whole, with their rows (ByKey): abort_reuse's cases carried from the
// slices' workers.
func (d *Dataset) ensureFacts(ctx context.Context, keys []string) error {
	return d.readBack(ctx, keys, nil, func(k string) bool { return d.ByKey[k] != nil }, nil, func(f *Fact) {
		if d.ByKey[f.Key] == nil {
			d.remember(f)
		}
	})
}

// readBack links again the requests of keys and rooms the run saved that
// hasKey and hasRoom do not know, and hands each to fn.
func (d *Dataset) readBack(ctx context.Context, keys []string, rooms []uint64,
	hasKey func(string) bool, hasRoom func(uint64) bool, fn func(*Fact)) error {
	if d.complete {
		return nil
	}
	var wantK []string
	for _, k := range keys {
		if k != "" && !hasKey(k) {
			wantK = append(wantK, k)
		}
	}
	var wantR []uint64
	for _, r := range rooms {
		if r != 0 && !hasRoom(r) {
			wantR = append(wantR, r)
		}
	}
	if len(wantK) == 0 && len(wantR) == 0 {
		return nil
	}
	slices.Sort(wantK)
	wantK = slices.Compact(wantK)
	slices.Sort(wantR)
	wantR = slices.Compact(wantR)
	refs, err := d.DB.RunFactRefs(ctx, d.readVersion(), d.Window.From, d.Window.To, wantK, wantR)
	if err != nil {
		return fmt.Errorf("requests named after the slices: %w", err)
	}
	return d.linkRefs(ctx, refs, fn)
}

// relinkChunk is how many lines one evidence read asks for; refs are in
// time order, so each read covers a short span of the tables.
const relinkChunk = 8_000

// linkRefs links saved facts of the window again from their own lines and
// hands each to fn: every line is read first, then linked together.
func (d *Dataset) linkRefs(ctx context.Context, refs []domain.FactRef, fn func(*Fact)) error {
	want := map[string]bool{}
	var (
		gw     []*GatewayResponse
		engine []*EngineEvent
		xfer   []*TransferEvent
		seen   = map[uint64]bool{} // a line read twice (in two chunks, or not merged yet) counts once
	)
	keep := func(line uint64) bool {
		if seen[line] {
			return false
		}
		seen[line] = true
		return true
	}
	sink := domain.EvidenceSink{
		Gateway: func(g *GatewayResponse) error {
			if keep(g.Line) {
				gw = append(gw, g)
			}
			return nil
		},
		Engine: func(e *EngineEvent) error {
			if keep(e.Line) {
				engine = append(engine, e)
			}
			return nil
		},
		Transfer: func(t *TransferEvent) error {
			if keep(t.Line) {
				xfer = append(xfer, t)
			}
			return nil
		},
	}
	m := d.Cfg.LinkMargin
	var lines []uint64
	var lo, hi time.Time
	read := func() error {
		if len(lines) == 0 {
			return nil
		}
		slices.Sort(lines)
		err := d.DB.EvidenceByLines(ctx, lo.Add(-m), hi.Add(m), slices.Compact(lines), sink)
		lines = lines[:0]
		if err != nil {
			return fmt.Errorf("lines of saved requests: %w", err)
		}
		return nil
	}
	for _, r := range refs {
		if !d.Window.Contains(r.TS) {
			continue
		}
		want[r.Key] = true
		if len(lines) == 0 {
			lo = r.TS
		}
		lines = append(lines, r.Lines...)
		hi = r.TS
		if len(lines) >= relinkChunk {
			if err := read(); err != nil {
				return err
			}
		}
	}
	if err := read(); err != nil {
		return err
	}
	if len(want) > 0 {
		// Only the wanted requests' lines are read, so a response whose id
		// another reused may be linked without it: its saved key (id, or
		// id and line) is the one wanted.
		for _, f := range correlate(d.Window, d.Boots, d.nodes, gw, engine, xfer, 0) {
			if !want[f.Key] && f.GW != nil && want[reusedKey(f.GW)] {
				f.Key = reusedKey(f.GW)
			}
			if want[f.Key] {
				fn(f)
			}
		}
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
