package analyze

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/simulate"
)

// memClaims is an in-process Claims with leases by wall clock: the
// analyze package's tests check how workers split and finish a job; the
// ClickHouse-backed claims have their own tests (internal/workclaim) and
// the binary's cluster test runs both together.
type memClaims struct {
	lease  time.Duration
	holder map[string]string    // unit → worker
	until  map[string]time.Time // unit → lease end
	done   map[string]bool
	worker string
	// dieAfter, when set, makes this worker's Claim fail after it holds
	// that many units (a crash with a slice claimed and not done).
	dieAfter int
	claimed  *int
	// dieOn, when set, makes this worker die as it claims its first unit
	// with that prefix (claimed, not done); waitFor makes its claims of
	// units with that prefix find them taken until another worker has
	// claimed one (so the other is sure to get one).
	dieOn, waitFor string
	// claims logs "worker unit" for every claim granted, in order.
	claims *[]string
	// dead: this worker died; every call fails from then on, as nothing
	// of a dead process reaches the table.
	dead *bool
}

func newMemClaims(lease time.Duration) *memClaims {
	return &memClaims{lease: lease, holder: map[string]string{}, until: map[string]time.Time{}, done: map[string]bool{},
		claims: new([]string)}
}

// as is the view of one worker.
func (c *memClaims) as(worker string, dieAfter int) *memClaims {
	n := 0
	return &memClaims{lease: c.lease, holder: c.holder, until: c.until, done: c.done, worker: worker,
		dieAfter: dieAfter, claimed: &n, claims: c.claims, dead: new(bool)}
}

var errDied = errors.New("worker died")

type memLease struct {
	c    *memClaims
	unit string
}

var memMu sync.Mutex // one lock for all views (they share the maps)

func (c *memClaims) Claim(_ context.Context, job, unit string) (Lease, error) {
	memMu.Lock()
	defer memMu.Unlock()
	k := job + "/" + unit
	if c.done[k] || (c.holder[k] != "" && time.Now().Before(c.until[k])) {
		return nil, nil
	}
	if *c.dead {
		return nil, errDied
	}
	if c.waitFor != "" && strings.HasPrefix(unit, c.waitFor) && !slices.ContainsFunc(*c.claims, func(s string) bool {
		return strings.HasPrefix(s, c.waitFor) || strings.Contains(s, " "+c.waitFor)
	}) {
		return nil, nil
	}
	*c.claimed++
	c.holder[k], c.until[k] = c.worker, time.Now().Add(c.lease)
	*c.claims = append(*c.claims, c.worker+" "+unit)
	if (c.dieAfter > 0 && *c.claimed == c.dieAfter) || (c.dieOn != "" && strings.HasPrefix(unit, c.dieOn)) {
		*c.dead = true
		return memLease{c, k}, errDied // claimed, then died before working on it
	}
	return memLease{c, k}, nil
}

func (c *memClaims) Remaining(_ context.Context, job string, units []string) ([]string, error) {
	memMu.Lock()
	defer memMu.Unlock()
	if *c.dead {
		return nil, errDied
	}
	var out []string
	for _, u := range units {
		if !c.done[job+"/"+u] {
			out = append(out, u)
		}
	}
	return out, nil
}

func (l memLease) Renew(context.Context) error {
	memMu.Lock()
	defer memMu.Unlock()
	if *l.c.dead {
		return errDied
	}
	l.c.until[l.unit] = time.Now().Add(l.c.lease)
	return nil
}

func (l memLease) Done(context.Context) error {
	memMu.Lock()
	defer memMu.Unlock()
	if *l.c.dead {
		return errDied
	}
	l.c.done[l.unit] = true
	return nil
}

// TestWorkersEqualSingleRun: two workers share a job, one of them dies
// holding a slice; the other takes it over after the lease and finishes.
// Every finding and the notification list equal a single process's
// analysis of the same window in slices.
func TestWorkersEqualSingleRun(t *testing.T) {
	claims := newMemClaims(2 * time.Second)
	single, job, reps := runTwoWorkers(t, claims.as("a", 3), claims.as("b", 0), 200*time.Millisecond)
	fin := reps[1].Report
	if reps[1].Done < 1 || reps[0].Done < 1 {
		t.Logf("slices done: a %d, b %d of %d", reps[0].Done, reps[1].Done, reps[1].Slices)
	}
	total := sameAnalysis(t, single, fin)
	t.Logf("%d findings, %d list rows, %d slices: a did %d before dying, b %d", total, len(fin.Reconstruction.Rows),
		reps[1].Slices, reps[0].Done, reps[1].Done)

	// The job recorded its slices' rows as one link: the next analysis of
	// the window takes them instead of saving them again, with the same
	// findings and list.
	db := reps[1].db
	version, err := jobVersion(job)
	if err != nil {
		t.Fatal(err)
	}
	link, ok, err := db.LatestFactLink(context.Background())
	if err != nil || !ok || link.Version != version {
		t.Fatalf("the job recorded no link of its rows (%v, %+v)", err, link)
	}
	next, err := (&Runner{DB: db, Cfg: workersConfig(), Trigger: "test", Now: func() time.Time { return testNow.Add(2 * time.Minute) }}).Run(context.Background(), Window{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if next.Adopted == 0 || next.Adopted != link.Digest.N || next.Relinked {
		t.Errorf("the analysis after the job adopted %d rows (relinked %v), want the job's %d", next.Adopted, next.Relinked, link.Digest.N)
	}
	sameAnalysis(t, single, withStoredList(t, db, next))
}

// workerRun is a worker's report and the store it ran on.
type workerRun struct {
	*WorkerReport
	db *chstore.Store
}

// runTwoWorkers analyzes the abort-race incident in one process (single)
// and as a job of workers a and b with these views of one claims table. a
// must die (its claims make it) and b must conclude the job.
func runTwoWorkers(t *testing.T, a, b *memClaims, poll time.Duration) (single *Report, job string, reps []workerRun) {
	t.Helper()
	db, _ := loaded(t, simulate.Config{Scenario: "abort-race", Seed: 11, Scale: 0.25, DecodePool: 12_288})
	cfg := workersConfig()
	ctx := context.Background()
	single, err := (&Runner{DB: db, Cfg: cfg, Trigger: "test", Now: func() time.Time { return testNow }}).Run(ctx, Window{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	withStoredList(t, db, single)
	job = NewJobID(testNow.Add(time.Minute))
	var wg sync.WaitGroup
	reps = make([]workerRun, 2)
	errs := make([]error, 2)
	for i, c := range []*memClaims{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &Runner{DB: db, Cfg: cfg, Trigger: "test", Now: func() time.Time { return testNow.Add(time.Minute) }}
			reps[i].db = db
			reps[i].WorkerReport, errs[i] = r.RunWorker(ctx, Window{}, nil, Job{ID: job, Worker: c.worker, Lease: 2 * time.Second, Poll: poll}, c, db)
		}()
	}
	wg.Wait()
	if !errors.Is(errs[0], errDied) || errs[1] != nil {
		t.Fatalf("worker a: %v (want it to die), worker b: %v", errs[0], errs[1])
	}
	if reps[1].Report == nil {
		t.Fatal("worker b did not finish the job")
	}
	withStoredList(t, db, reps[1].Report)
	return single, job, reps
}

// workersConfig is the analysis the worker tests run, in slices.
func workersConfig() Config {
	cfg := DefaultConfig()
	cfg.DeferredRelease = "off"
	cfg.SliceRequests = 400
	return cfg
}

// sameAnalysis fails t unless the workers' report has single's findings
// and notification list; it returns how many findings it compared.
func sameAnalysis(t *testing.T, single, fin *Report) int {
	t.Helper()
	total := 0
	for i := range single.Runs {
		a, b := single.Runs[i], fin.Runs[i]
		total += len(a.Findings)
		if a.Run.Status != b.Run.Status || len(a.Findings) != len(b.Findings) {
			t.Errorf("%s: %s with %d findings single, %s with %d by workers (%s)", a.Run.Analyzer, a.Run.Status, len(a.Findings),
				b.Run.Status, len(b.Findings), b.Run.Error)
			continue
		}
		for j := range a.Findings {
			fa, fb := a.Findings[j], b.Findings[j]
			fa.RunID, fb.RunID = "", ""
			normalize(&fa)
			normalize(&fb)
			if d := findingDiff(fa, fb); d != "" {
				t.Errorf("%s finding %s: %s", a.Run.Analyzer, fa.ID, d)
			}
		}
	}
	if total == 0 {
		t.Fatal("no findings compared")
	}
	if !reflect.DeepEqual(single.Reconstruction.Rows, fin.Reconstruction.Rows) {
		t.Errorf("notification list differs:\nsingle  %+v\nworkers %+v", single.Reconstruction.Rows, fin.Reconstruction.Rows)
	}
	return total
}

// TestWorkersShareTheReplay: the replay of a job's conclusion is split
// among its workers by decode node. Worker a dies as it claims its first
// node (b waits until it has one), so either b concludes and takes a's
// node over after its lease, or a concluded and b takes the conclusion
// over; either way the findings and the notification list equal a single
// process's, which replays in one process.
func TestWorkersShareTheReplay(t *testing.T) {
	claims := newMemClaims(2 * time.Second)
	a, b := claims.as("a", 0), claims.as("b", 0)
	a.dieOn, b.waitFor = "replay/", "replay/"
	single, job, reps := runTwoWorkers(t, a, b, 100*time.Millisecond)
	ctx := context.Background()
	db := reps[1].db
	var aNode, bNodes []string
	for _, c := range *claims.claims {
		if w, unit, _ := strings.Cut(c, " "); strings.HasPrefix(unit, "replay/") {
			if w == "a" {
				aNode = append(aNode, unit)
			} else {
				bNodes = append(bNodes, unit)
			}
		}
	}
	if len(aNode) != 1 || len(bNodes) < 2 {
		t.Fatalf("replay units claimed: a %v, b %v (want a to die on one, b to replay at least two)", aNode, bNodes)
	}
	// b's asks were answered for every node, and every answer is b's (a
	// concluding worker that died leaves its asks half answered: the
	// worker that takes the conclusion over asks again).
	asks := 0
	err := db.ReplayAsks(ctx, job, "", func(p domain.ReplayPart) error {
		asks++
		j, err := decodeAsk(p.Data)
		if err != nil {
			return err
		}
		answered := map[string]bool{}
		if err := db.ReplayAnswers(ctx, job, p.Ask, func(a domain.ReplayPart) error {
			if a.Worker != "b" {
				t.Errorf("ask %s: %s answered by %s, which died before replaying", p.Ask, a.Unit, a.Worker)
			}
			answered[a.Unit] = true
			return nil
		}); err != nil {
			return err
		}
		if strings.Contains(p.Ask, "-b-") && len(answered) != len(j.nodes) {
			t.Errorf("ask %s: %d of %d nodes answered", p.Ask, len(answered), len(j.nodes))
		}
		return nil
	})
	if err != nil || asks == 0 {
		t.Fatalf("replay asks: %d, %v", asks, err)
	}
	total := sameAnalysis(t, single, reps[1].Report)
	t.Logf("%d findings, %d list rows; %d asks; a died on %s, b replayed %d nodes", total,
		len(reps[1].Report.Reconstruction.Rows), asks, aNode[0], len(bNodes))
}

// normalize makes empty and nil lists alike (a JSON round trip does not
// keep the difference, and neither does a stored row).
func normalize(f *Finding) {
	if len(f.RIDs) == 0 {
		f.RIDs = nil
	}
	if len(f.ForeignTenants) == 0 {
		f.ForeignTenants = nil
	}
	if len(f.ForeignRequestKeys) == 0 {
		f.ForeignRequestKeys = nil
	}
	if len(f.Evidence) == 0 {
		f.Evidence = nil
	}
}
