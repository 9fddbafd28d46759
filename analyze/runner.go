package analyze

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// Config holds the analyzer parameters (the `analyze` config section).
type Config struct {
	// LinkMargin widens the engine/transfer read around the window so a
	// request that started inside it is linked to lines logged after it
	// ended (long decodes, 300 s transfer timeouts, clock skew).
	LinkMargin time.Duration
	// Speed: impossible-speed fit (analyzer impossible_speed).
	SpeedMinUncached uint64  // smallest uncached prompt judged
	SpeedMADs        float64 // how many robust sigmas below the fit is impossible
	SpeedMaxRatio    float64 // and at most this fraction of the fitted TTFT
	SpeedSample      int     // points per node used for the fit
	SpeedMinSamples  int     // fewer normal points: no fit, no finding
	// AbortReuseWindow bounds how long after a decode-side abort a stalled
	// transfer may still land in pages that were handed to other requests.
	AbortReuseWindow time.Duration
	// DeferredRelease: "off", "on" or "unknown". With it on, decode keeps
	// aborted pages until the transfer ends; only "off" makes unconfirmed
	// abort-reuse candidates MEDIUM (notifiable).
	DeferredRelease string
	// GapThreshold: silence on a node longer than this while the rest of
	// the fleet logged is a completeness gap.
	GapThreshold time.Duration
	// SliceRequests is the most gateway responses analysis holds in
	// memory at once: a window with more is read in slices of about this
	// many (slices.go). 0 means DefaultSliceRequests; negative reads any
	// window whole.
	SliceRequests int
	// SkipReplay analyzes as if no allocator replay were possible (every
	// victim falls back to its node/rank window, abort_reuse keeps only
	// the candidates received after the abort): what the analysis cost
	// before the replay existed. `kvtrail bench analyze` runs both to
	// report the replay's cost on the same data.
	SkipReplay bool
	// ReplayWorkers is how many decode nodes the allocator replay streams
	// at once (0: one per CPU).
	ReplayWorkers int

	// ignorePages makes the analyzers act as if no page-level events
	// existed (tests compare the estimated and the exact lineage on one
	// ingest).
	ignorePages bool
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		LinkMargin:       15 * time.Minute,
		SpeedMinUncached: 8192,
		SpeedMADs:        6,
		SpeedMaxRatio:    0.25,
		SpeedSample:      2000,
		SpeedMinSamples:  30,
		AbortReuseWindow: 60 * time.Second,
		DeferredRelease:  "unknown",
		GapThreshold:     10 * time.Minute,
	}
}

// Names lists the analyzer names in run order.
func Names() []string {
	var out []string
	for _, a := range All(DefaultConfig()) {
		out = append(out, a.Name())
	}
	return out
}

// Dataset is what one run reads, loaded in bulk once and shared by the
// analyzers (no per-request queries).
type Dataset struct {
	DB        Store
	Window    Window
	Cfg       Config
	Boots     *Boots
	Facts     []*Fact
	ByRoom    map[uint64]*Fact
	ByKey     map[string]*Fact
	Engine    []*EngineEvent
	Transfer  []*TransferEvent
	Watermark time.Time
	// Gaps are the completeness gaps per node (see Completeness).
	Gaps []Gap

	// A slice of a window read in slices (slices.go): own is the span whose
	// findings it keeps, parent the window's Dataset. complete says that
	// Facts, ByRoom and ByKey hold every request of the window (it was
	// read whole); otherwise requests are read back from request_facts
	// (the run's rows: readVersion) when a window-wide step needs them.
	own    *Window
	parent *Dataset
	linked []*Fact // every request linked (own and context), in time order
	// kept and keptRooms are the summaries of the requests the window's
	// conclusions read when it is read in slices (keep, ensureRequests).
	kept         map[string]*domain.RequestSummary
	keptRooms    map[uint64]*domain.RequestSummary
	complete     bool
	factsVersion uint64 // the run's rows are saved under it
	adopted      uint64 // the version of the link whose rows the run took as its own (adopt.go); 0: none
	nodes        nodeMap

	pages    *pageReplay
	pagesErr error
	pagesOK  bool

	// The one allocator replay of the dataset (replay_shared.go) and the
	// victim requests noted for it.
	replay *sharedReplay
	noted  *victimRooms
	// replayer runs a replay's decode nodes; nil runs them in this
	// process (replayNodes), a job's concluding worker shares them with
	// the job's other workers (replay_jobs.go).
	replayer func(context.Context, replayJob) ([]replayAnswer, error)
}

// Run is an immutable analyzer_runs record.
type Run = domain.Run

// RunResult is one analyzer's run, its findings and which of them no
// earlier run of the same analyzer version had recorded.
type RunResult struct {
	Run      Run
	Findings []Finding // nil under Runner.Lean
	New      []Finding // nil under Runner.Lean
	// NewCount is len(New) as saved, also under Runner.Lean.
	NewCount int
	// Duration is how long the run spent on the analyzer: for a pass Run
	// starts beside the slices (early.go), only the time it then waited
	// for it and stored its findings.
	Duration time.Duration
}

// Phase is a timed step of Runner.Run: what it cost the run beyond what
// overlapped with other steps, so the phases add up to at most the run.
type Phase struct {
	Name     string
	Duration time.Duration
}

// Report is what Runner.Run did.
type Report struct {
	Window         Window
	Phases         []Phase
	Runs           []RunResult
	Reconstruction *Reconstruction
	// Slices is how many slices the window was read in (1: whole).
	Slices int
	// Adopted is how many requests' rows the run took from a link instead
	// of saving them again (adopt.go); Relinked says the newest link's
	// digest disagreed with the run's, which then saved those rows itself
	// after its slices.
	Adopted  uint64
	Relinked bool
	// ReplayPasses is how many times the allocator replay ran over the
	// window (replay_shared.go: one when abort_reuse's answered the
	// reconstruction too).
	ReplayPasses int
	// Linked is how many requests the run linked (saved or adopted).
	Linked int
}

// Errors reports whether any analyzer run ended in ERROR.
func (r *Report) Errors() bool {
	for _, x := range r.Runs {
		if x.Run.Status == StatusError {
			return true
		}
	}
	return false
}

// Runner runs analyzers over a window. A caller (the CLI, later `serve`)
// can call Run repeatedly over [from, to) windows; RunResult.New holds the
// findings that are new since the previous runs.
type Runner struct {
	DB        Store
	Cfg       Config
	Analyzers []Analyzer
	// Endpoints maps gateway endpoints (http://10.0.0.11:30000) to node
	// names. Optional: the endpoints ingest recorded from the sources
	// manifest (table nodes), server_args and bootstrap_host fill the rest.
	Endpoints map[string]string
	Trigger   string // "cli", "serve", "case", "test"
	// CaseID, when set, is recorded on the runs and the affected list, so a
	// case shows the reconstruction made for it.
	CaseID string
	Log    *slog.Logger
	// Now is the clock (tests pin it); nil means time.Now.
	Now func() time.Time
	// SkipReconstruct leaves the affected list alone.
	SkipReconstruct bool
	// Live marks rounds over a moving window of recent data (serve's live
	// analysis). A live round records only findings no earlier run has —
	// a known finding keeps the copy a run over its whole evidence made —
	// and never rebuilds the notification list: a minute's window must not
	// replace what a run over the incident concluded.
	Live bool
	// Lean: the Report keeps each run's counts, not its findings, which
	// are stored as each analyzer concludes. A run over an incident of
	// millions of requests makes hundreds of thousands of findings (most
	// of them abort_reuse leads); held in the Report until the run ends,
	// they sat beside the reconstruction's own reads. The CLI, the
	// benchmarks and case analysis, which print or return counts and run
	// ids, run lean; tests and live rounds read the findings.
	Lean bool
	// NoAdopt has the run save every request it links even where the
	// newest link saved the same rows (adopt.go): tests, and the bench's
	// comparison of the two.
	NoAdopt bool
}

// TriggerLive is the trigger of serve's live rounds (Runner.Live).
const TriggerLive = domain.TriggerLive

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

// Select returns the analyzers named (all when names is empty).
func Select(all []Analyzer, names []string) ([]Analyzer, error) {
	if len(names) == 0 {
		return all, nil
	}
	var out []Analyzer
	for _, n := range names {
		i := slices.IndexFunc(all, func(a Analyzer) bool { return a.Name() == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown analyzer %q (known: %v)", n, Names())
		}
		out = append(out, all[i])
	}
	return out, nil
}

// Load reads and links everything a run over w needs, whole (benchmarks
// and tests; Run reads a large window in slices).
func (r *Runner) Load(ctx context.Context, w Window) (*Dataset, error) {
	return r.load(ctx, w, true)
}

// load is Load; gaps=false skips the completeness scan, which linking
// requests does not need.
func (r *Runner) load(ctx context.Context, w Window, gaps bool) (*Dataset, error) {
	wd, err := r.prepare(ctx, w, gaps)
	if err != nil {
		return nil, err
	}
	if gaps {
		if wd.Gaps, err = r.gaps(ctx, wd); err != nil {
			return nil, err
		}
	}
	d, err := r.loadSlice(ctx, wd, wd.Window, true)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// prepare fills an open window from the data's span and reads what every
// slice shares: boots, the watermark (when analyzing) and the endpoint →
// node map. The gaps are read apart (gaps), since Run reads them beside
// the slices.
func (r *Runner) prepare(ctx context.Context, w Window, analyzing bool) (*Dataset, error) {
	var wm time.Time
	if analyzing || w.From.IsZero() || w.To.IsZero() {
		// The data's span fills an open window; its watermark is for
		// analyzers (linking alone needs neither).
		from, to, watermark, err := DataSpan(ctx, r.DB)
		if err != nil {
			return nil, err
		}
		if w.From.IsZero() {
			w.From = from
		}
		if w.To.IsZero() {
			w.To = to
		}
		wm = watermark
	}
	if !w.To.After(w.From) {
		return nil, fmt.Errorf("empty window %s", w)
	}
	cfg := r.Cfg
	if cfg.LinkMargin <= 0 {
		cfg.LinkMargin = DefaultConfig().LinkMargin
	}
	d := &Dataset{DB: r.DB, Window: w, Cfg: cfg, Watermark: wm,
		ByRoom: map[uint64]*Fact{}, ByKey: map[string]*Fact{}}
	var err error
	if d.Boots, err = r.DB.NodeBoots(ctx); err != nil {
		return nil, err
	}
	declared, err := r.DB.NodeEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	for ep, n := range r.Endpoints { // the caller's mapping wins
		declared[ep] = n
	}
	lo, hi := w.From.Add(-cfg.LinkMargin), w.To.Add(cfg.LinkMargin)
	votes, err := r.DB.PrefillHostVotes(ctx, lo, hi)
	if err != nil {
		return nil, err
	}
	d.nodes = buildNodeMap(declared, d.Boots, votes)
	return d, nil
}

// gaps are the completeness gaps of a prepared window. Nothing a slice
// does reads them: the conclusions do (markCompleteness, completeness,
// the replay's fallback), so Run reads them beside the slices.
func (r *Runner) gaps(ctx context.Context, wd *Dataset) ([]Gap, error) {
	return r.DB.Silences(ctx, wd.Window.From, wd.Window.To, wd.Cfg.GapThreshold)
}

// loadSlice reads and links the requests of own (a span of wd's window).
// whole: own is the window, the Dataset is complete. Otherwise the slice
// also links the window's requests within sliceContext of own, for
// lookups; its Facts are its own requests only.
func (r *Runner) loadSlice(ctx context.Context, wd *Dataset, own Window, whole bool) (*Dataset, error) {
	w, cfg := wd.Window, wd.Cfg
	d := &Dataset{DB: r.DB, Window: w, Cfg: cfg, Watermark: wd.Watermark, Boots: wd.Boots, Gaps: wd.Gaps,
		nodes: wd.nodes, factsVersion: wd.factsVersion, adopted: wd.adopted, complete: whole}
	link := w // the requests linked
	if !whole {
		own := own
		d.own, d.parent = &own, wd
		c := cfg.sliceContext()
		link = Window{From: maxTime(own.From.Add(-c), w.From), To: minTime(own.To.Add(c), w.To)}
	}
	lo, hi := link.From.Add(-cfg.LinkMargin), link.To.Add(cfg.LinkMargin)
	var gw []*GatewayResponse
	var err error
	if whole {
		if gw, err = loadGateway(ctx, r.DB, link); err != nil {
			return nil, err
		}
		if d.Engine, err = loadEngine(ctx, r.DB, lo, hi); err != nil {
			return nil, err
		}
		if d.Transfer, err = loadTransfer(ctx, r.DB, lo, hi); err != nil {
			return nil, err
		}
	} else if gw, err = loadLinked(ctx, r.DB, d, link, lo, hi); err != nil {
		return nil, err
	}
	facts := correlate(link, d.Boots, d.nodes, gw, d.Engine, d.Transfer, cfg.sliceContext())
	d.linked = facts
	d.ByRoom = make(map[uint64]*Fact, len(facts))
	d.ByKey = make(map[string]*Fact, len(facts))
	for _, f := range facts {
		if f.Room != 0 {
			d.ByRoom[f.Room] = f
		}
		d.ByKey[f.Key] = f
		if whole || own.Contains(f.TS) {
			d.Facts = append(d.Facts, f)
		}
	}
	return d, nil
}

// Run analyzes w: it links the window's requests (in slices when they are
// more than Config.SliceRequests), saves them to request_facts (or, for
// those the gateway logged, takes the rows a link saved: adopt.go), runs the
// selected analyzers (each timed and recorded as its own run) and rebuilds
// the affected list from the latest runs. It returns an error only when
// the data could not be loaded or results could not be stored; an
// analyzer's own failure is recorded as an ERROR run.
func (r *Runner) Run(ctx context.Context, w Window, names []string) (*Report, error) {
	analyzers := r.Analyzers
	if analyzers == nil {
		analyzers = All(r.Cfg)
	}
	sel, err := Select(analyzers, names)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	t0 := time.Now()
	started := r.now()
	wd, err := r.prepare(ctx, w, true)
	if err != nil {
		return nil, err
	}
	wd.factsVersion = uint64(started.UnixNano())
	rep.Window = wd.Window
	plan, err := r.plan(ctx, wd)
	if err != nil {
		return nil, err
	}
	rep.Slices = len(plan)
	loadTook := time.Since(t0)
	saver := newFactSaver(ctx, r.DB, wd.factsVersion)
	defer saver.wait() // an early return leaves no insert running
	passes := make([]pass, len(sel))
	found := make([]findingSpill, len(sel))
	defer closeFound(found)
	failed := make([]error, len(sel))
	took := make([]time.Duration, len(sel))
	// What reads only the store and the window runs beside the slices
	// (early.go); an early return cancels it and waits for it.
	bg, stop := context.WithCancel(ctx)
	prepared := wd.early() // wd itself is replaced when the window is read whole
	gaps := readLater(bg, func(ctx context.Context) ([]Gap, error) { return r.gaps(ctx, prepared) })
	var early []starter
	defer func() {
		stop()
		_, _ = gaps.wait()
		for _, s := range early {
			s.wait()
		}
	}()
	for i, a := range sel {
		passes[i] = passOf(a)
		if s, ok := passes[i].(starter); ok {
			s.start(bg, prepared)
			early = append(early, s)
		}
	}
	adopt, err := r.adoptable(ctx, wd)
	if err != nil {
		return nil, err
	}
	// A run that saves every request itself records its rows of
	// gateway-logged requests as a link would (adopt.go), so that the next
	// analysis of the window takes them instead of saving them again: after
	// `kvtrail ingest --analyze` this run is the window's only link.
	var link *domain.FactLink
	if adopt == nil && !r.Live {
		link = &domain.FactLink{Version: wd.factsVersion, From: wd.Window.From, To: wd.Window.To, LinkedAt: started}
		saver.digest = &link.Digest
	}
	for _, own := range plan {
		t0 = time.Now()
		d, err := r.loadSlice(ctx, wd, own, len(plan) == 1)
		if err != nil {
			return nil, err
		}
		loadTook += time.Since(t0)
		save := d.Facts
		switch {
		case adopt != nil:
			save = adopt.take(save)
		case link != nil:
			sawLogged(link, save)
		}
		rep.Linked += len(d.Facts)
		if err := saver.save(save); err != nil {
			return nil, err
		}
		for i := range sel {
			if failed[i] != nil {
				continue
			}
			t0 = time.Now()
			fs, err := passes[i].slice(ctx, d)
			took[i] += time.Since(t0)
			if err != nil {
				failed[i] = err
				continue
			}
			fs = slices.DeleteFunc(fs, func(f Finding) bool { return !d.owns(f.TS) })
			d.keep(sel[i].Name(), fs)
			if err := found[i].add(fs); err != nil {
				return nil, err
			}
		}
		if len(plan) == 1 {
			wd = d // read whole: the window's Dataset is the slice
		}
	}
	if err := saver.wait(); err != nil {
		return nil, err
	}
	if link != nil {
		// Recorded once every row is in, as Correlate records its own.
		if err := r.DB.SaveFactLink(ctx, *link); err != nil {
			return nil, err
		}
	}
	if adopt != nil {
		t0 = time.Now()
		ok, err := r.settle(ctx, adopt, wd)
		if err != nil {
			return nil, err
		}
		if ok {
			rep.Adopted = adopt.got.N
		} else {
			rep.Relinked = true
		}
		saver.waited += time.Since(t0)
	}
	t0 = time.Now()
	if wd.Gaps, err = gaps.wait(); err != nil {
		return nil, err
	}
	// What saving and the gaps cost beyond what overlapped with the
	// slices' work.
	rep.Phases = append(rep.Phases, Phase{"load+correlate", loadTook}, Phase{"save request_facts", saver.waited},
		Phase{"completeness gaps", time.Since(t0)})
	return rep, r.conclude(ctx, wd, sel, passes, found, failed, took, started, rep)
}

// conclude finishes each analyzer's pass on the window's Dataset, records
// its run and findings, and rebuilds the affected list.
func (r *Runner) conclude(ctx context.Context, wd *Dataset, sel []Analyzer, passes []pass, found []findingSpill,
	failed []error, took []time.Duration, started time.Time, rep *Report) error {
	reconstruct := !r.SkipReconstruct && !r.Live
	// This run's victim findings are stored by the reconstruction, once it
	// has filled in their foreign tenants: one insert, where writing them
	// first and updating them after took one ALTER ... UPDATE mutation per
	// 96 KiB of victims, each rewriting the findings table (at 2M requests
	// 243 of them, still running after five minutes).
	var held heldFindings
	defer held.close()
	for i, a := range sel {
		hold := func(f *Finding) bool { return reconstruct && marksVictim(a.Name(), f) }
		// The reconstruction's victims, known early, share the allocator
		// replay abort_reuse runs (replay_shared.go); they are held for
		// the reconstruction, which stores them.
		res, err := r.concludeRun(ctx, wd, a, emitterOf(passes[i]), &found[i], failed[i], took[i], started, hold, &held)
		found[i].close()
		if err != nil {
			return errors.Join(err, r.saveHeld(ctx, &held))
		}
		wd.noteVictims(&held.rooms)
		if r.Lean {
			res.Findings, res.New = nil, nil
		}
		rep.Runs = append(rep.Runs, res)
		rep.Phases = append(rep.Phases, Phase{"analyzer " + a.Name(), res.Duration})
		if r.Log != nil {
			r.Log.Info("analyzer run", slog.String("analyzer", a.Name()), slog.String("status", res.Run.Status),
				slog.Int("findings", res.Run.Findings), slog.Int("new", res.NewCount), slog.Duration("took", res.Duration))
		}
	}
	if reconstruct {
		t0 := time.Now()
		rec, err := r.reconstruct(ctx, wd, &held, true)
		if err != nil {
			return err
		}
		rep.Reconstruction = rec
		rep.Phases = append(rep.Phases, Phase{"reconstruct affected", time.Since(t0)})
	}
	if wd.replay != nil {
		rep.ReplayPasses = wd.replay.passes
	}
	return nil
}

// closeFound drops the slices' findings an early return left.
func closeFound(found []findingSpill) {
	for i := range found {
		found[i].close()
	}
}

// plan cuts the window into the slices Run reads.
func (r *Runner) plan(ctx context.Context, wd *Dataset) ([]Window, error) {
	maxReq := wd.Cfg.SliceRequests
	if maxReq == 0 {
		maxReq = DefaultSliceRequests
	}
	if maxReq < 0 {
		return []Window{wd.Window}, nil
	}
	buckets, err := r.DB.RequestCounts(ctx, wd.Window.From, wd.Window.To, sliceStep)
	if err != nil {
		return nil, err
	}
	return domain.CutWindow(buckets, wd.Window, maxReq), nil
}

// Correlate links the gateway-logged requests of w (gateway → prefill →
// transfer → decode) and saves them to request_facts, without running
// analyzers: what `kvtrail ingest` does once its rows are in, so a request
// can be followed across nodes before anyone runs analyze. It reads the
// node map once for w, as an analysis of w does, then links w in slices of
// at most maxRequests gateway responses, cut where the requests are, as an
// analysis cuts its slices: a stray 1970 timestamp in a log widens the
// window, not the work, and memory follows the requests of one slice.
// maxRequests 0 means the analysis's own slices (Config.SliceRequests,
// DefaultSliceRequests when unset), negative the window whole. Each slice
// is read as an analysis reads it (its requests with their context,
// engine lines LinkMargin beyond); each fact is kept by the one slice its
// time falls in. Once every row is in it records the link in fact_links
// (domain.FactLink), whose rows an analysis may adopt (adopt.go). It
// returns the facts saved.
//
// It used to link hour by hour and read the node map for each hour: at
// scale 2 (197,675 requests over 13 days), 314 slices whose fixed reads
// made linking take as long as the ingest before it. Then in slices of
// 8,000 requests, sized for ingest's 192 MiB memory limit: each slice's
// engine lines were read with 15 minutes of margin on both sides, and at
// scale 100 a slice of 8,000 spans about 15 minutes, so the server read
// every engine line about three times. Its caller now gives it the
// analysis's memory limit (cmd/kvtrail, runIngest).
func (r *Runner) Correlate(ctx context.Context, w Window, maxRequests int) (int, error) {
	began := r.now()
	wd, err := r.prepare(ctx, w, false)
	if err != nil {
		return 0, fmt.Errorf("correlate: %w", err)
	}
	link := domain.FactLink{Version: uint64(began.UnixNano()), From: wd.Window.From, To: wd.Window.To, LinkedAt: began}
	saved, err := r.saveLinked(ctx, wd, maxRequests, link.Version, &link)
	if err != nil {
		return saved, fmt.Errorf("correlate: %w", err)
	}
	// Recorded once every row is in: a link cut short has no record, and
	// no analysis takes its rows for its own (adopt.go).
	if err := r.DB.SaveFactLink(ctx, link); err != nil {
		return saved, fmt.Errorf("correlate: %w", err)
	}
	return saved, nil
}

// saveLinked links the requests of wd's window in slices of at most
// maxRequests (0: the analysis's slices) and saves those the gateway
// logged under version. Each slice is read as an analysis reads it, with
// the window's node map and boots; each request is kept by the slice its
// time falls in.
// When rec is set, it gets what was saved: the requests' digest and their
// earliest and latest time.
func (r *Runner) saveLinked(ctx context.Context, wd *Dataset, maxRequests int, version uint64, rec *domain.FactLink) (int, error) {
	if maxRequests == 0 {
		if maxRequests = r.Cfg.SliceRequests; maxRequests == 0 {
			maxRequests = DefaultSliceRequests
		}
	}
	buckets, err := r.DB.RequestCounts(ctx, wd.Window.From, wd.Window.To, sliceStep)
	if err != nil {
		return 0, err
	}
	saved := 0
	var pending []*Fact // saved together: one insert per factBatch, not per slice
	saver := newFactSaver(ctx, r.DB, version)
	if rec != nil {
		saver.digest = &rec.Digest
	}
	defer saver.wait()
	flush := func() error {
		if err := saver.save(pending); err != nil {
			return err
		}
		saved += len(pending)
		pending = nil
		return nil
	}
	plan := domain.CutWindow(buckets, wd.Window, maxRequests)
	for _, sw := range plan {
		// As an analysis reads its slices: the slice's requests linked
		// with their context around it. The cuts are where the requests
		// are, so an analysis of the same data cuts its slices at the same
		// places and links each request as this link did (adopt.go).
		d, err := r.loadSlice(ctx, wd, sw, len(plan) == 1)
		if err != nil {
			return saved, fmt.Errorf("%s: %w", sw, err)
		}
		for _, f := range d.Facts {
			// Only requests the gateway logged: their key (the request
			// id) is stable. A room only engines logged so far may get its
			// gateway line from a source not ingested yet, and would then
			// stay behind as a second row under "room:N"; analyze, whose
			// window decides that a gateway line is missing, saves those.
			if f.GW != nil {
				pending = append(pending, f)
				if rec != nil {
					rec.Saw(f.TS)
				}
			}
		}
		if len(pending) >= factBatch {
			if err := flush(); err != nil {
				return saved, err
			}
		}
	}
	if err := flush(); err != nil {
		return saved, err
	}
	return saved, saver.wait()
}

// RunAnalyzer runs one analyzer on a loaded dataset without storing
// anything (benchmarks time it; Run stores the result).
func (r *Runner) RunAnalyzer(ctx context.Context, d *Dataset, a Analyzer) RunResult {
	started := r.now()
	t0 := time.Now()
	fs, err := a.Analyze(ctx, d)
	return r.result(a, d, started, fs, err, time.Since(t0))
}

// result makes the run record of an analyzer's findings (or failure).
func (r *Runner) result(a Analyzer, d *Dataset, started time.Time, fs []Finding, err error, dur time.Duration) RunResult {
	run := r.newRun(a, d, started)
	run.Finished = r.now()
	res := RunResult{Run: run, Duration: dur}
	if err != nil {
		res.Run.Status, res.Run.Error = StatusError, err.Error()
		return res
	}
	fs = finalize(a, fs)
	markCompleteness(d, fs)
	for i := range fs {
		fs[i].RunID = run.ID
		if fs[i].Severity == High {
			res.Run.High++
		}
	}
	res.Findings = fs
	res.Run.Findings = len(fs)
	res.Run.Status = StatusSuccess
	if len(fs) == 0 {
		res.Run.Status = StatusNoFindings
	}
	return res
}

// newRun is the record of a run of a over d started at started, with its
// id (Finished and the counts are filled when it ends).
func (r *Runner) newRun(a Analyzer, d *Dataset, started time.Time) Run {
	params, _ := json.Marshal(a.Params())
	run := Run{Analyzer: a.Name(), Version: a.Version(), Params: string(params), Window: d.Window,
		Watermark: d.Watermark, Started: started, Trigger: r.Trigger, CaseID: r.CaseID}
	if r.Live {
		run.Trigger = TriggerLive // the current-findings rule tells live rounds apart by it
	}
	// Runs are unique executions: the nonce keeps two runs started in the
	// same instant (pinned clocks, parallel callers) apart.
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	h := sha256.Sum256([]byte(run.Analyzer + "\x00" + run.Version + "\x00" + run.Params + "\x00" + d.Window.String() +
		"\x00" + run.Started.Format(time.RFC3339Nano) + "\x00" + string(nonce[:])))
	run.ID = hex.EncodeToString(h[:12])
	return run
}
