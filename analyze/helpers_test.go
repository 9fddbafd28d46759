package analyze

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

func TestMain(m *testing.M) { testdb.Main(m) }

var simMu sync.Mutex

// simulated runs a scenario once per test binary.
type simCase struct {
	once  sync.Once
	dir   string
	truth *simulate.Truth
	err   error
}

var sims = map[string]*simCase{}

func simulated(t *testing.T, cfg simulate.Config) (string, *simulate.Truth) {
	t.Helper()
	key := fmt.Sprintf("%s/%d/%g/%d/%d/%d", cfg.Scenario, cfg.Seed, cfg.Scale, cfg.Days, cfg.Tenants, cfg.DecodePool)
	if cfg.PageEvents {
		key += "/pages"
	}
	if cfg.Retractions > 0 {
		key += fmt.Sprintf("/retract%g", cfg.Retractions)
	}
	if cfg.PageSize > 0 {
		key += fmt.Sprintf("/ps%d", cfg.PageSize)
	}
	simMu.Lock()
	c := sims[key]
	if c == nil {
		c = &simCase{}
		sims[key] = c
	}
	simMu.Unlock()
	c.once.Do(func() {
		c.dir, c.err = os.MkdirTemp("", "kvtrail-analyze-sim-")
		if c.err != nil {
			return
		}
		// Each scenario is used by one top-level test (its subtests share
		// it), so that test's end is when the files can go.
		dir := c.dir
		t.Cleanup(func() {
			_ = os.RemoveAll(dir)
			simMu.Lock()
			delete(sims, key) // a later test simulates it again
			simMu.Unlock()
		})
		cfg.OutDir = c.dir
		if _, c.err = simulate.Run(context.Background(), cfg); c.err != nil {
			return
		}
		c.truth, c.err = simulate.LoadTruth(filepath.Join(c.dir, "truth.json"))
	})
	if c.err != nil {
		t.Fatalf("simulate %s: %v", cfg.Scenario, c.err)
	}
	return c.dir, c.truth
}

// loaded simulates a scenario and ingests it into a fresh database that
// lives as long as t.
func loaded(t *testing.T, cfg simulate.Config) (*chstore.Store, *simulate.Truth) {
	t.Helper()
	dir, truth := simulated(t, cfg)
	return ingested(t, dir), truth
}

// ingested ingests the sources of dir's manifest (sources.yaml) into a
// fresh database that lives as long as t.
func ingested(t *testing.T, dir string) *chstore.Store {
	t.Helper()
	s := testdb.New(t)
	srcs, err := ingest.LoadManifest(filepath.Join(dir, "sources.yaml"))
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if _, err := ingest.New(s, ingest.Options{}).Ingest(context.Background(), srcs); err != nil {
		t.Fatalf("ingest: %v", err)
	}
	return s
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// storedList is the list rec was stored as, read back whole, in list
// order.
func storedList(t *testing.T, db AffectedReader, rec *Reconstruction) []AffectedRow {
	t.Helper()
	_, rows, err := db.AffectedRows(context.Background(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	sortList(rows)
	return rows
}

// heads is rows without their request keys, finding ids and evidence
// lines, as a stored reconstruction returns them.
func heads(rows []AffectedRow) []AffectedRow {
	out := slices.Clone(rows)
	for i := range out {
		out[i].RequestKeys, out[i].FindingIDs, out[i].Evidence = nil, nil, nil
	}
	return out
}

// sameList fails t unless two lists are the same row for row, an empty
// list the same as none.
func sameList(t *testing.T, an string, a []AffectedRow, bn string, b []AffectedRow) {
	t.Helper()
	norm := func(rows []AffectedRow) []AffectedRow {
		out := slices.Clone(rows)
		for i := range out {
			r := &out[i]
			for _, l := range []*[]string{&r.Models, &r.Nodes, &r.RequestKeys, &r.FindingIDs, &r.Counterparts} {
				if len(*l) == 0 {
					*l = nil
				}
			}
			if len(r.Evidence) == 0 {
				r.Evidence = nil
			}
			r.First, r.Last = r.First.UTC().Truncate(time.Second), r.Last.UTC().Truncate(time.Second) // stored as DateTime
		}
		return out
	}
	x, y := norm(a), norm(b)
	if len(x) != len(y) {
		t.Errorf("%s: %d rows, %s: %d", an, len(x), bn, len(y))
	}
	for i := range min(len(x), len(y)) {
		if !reflect.DeepEqual(x[i], y[i]) {
			t.Errorf("row %d differs:\n%s %+v\n%s %+v", i, an, x[i], bn, y[i])
			return
		}
	}
}

// withStoredList gives rep's list its rows as stored, read back whole
// right after the run, for the tests that compare two runs' lists: a
// later run of the same reconstruction stores under the same id.
func withStoredList(t *testing.T, db AffectedReader, rep *Report) *Report {
	t.Helper()
	if rep.Reconstruction != nil {
		rep.Reconstruction.Rows = storedList(t, db, rep.Reconstruction)
	}
	return rep
}
