package analyze

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

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
	s := testdb.New(t)
	srcs, err := ingest.LoadManifest(filepath.Join(dir, "sources.yaml"))
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if _, err := ingest.New(s, ingest.Options{}).Ingest(context.Background(), srcs); err != nil {
		t.Fatalf("ingest: %v", err)
	}
	return s, truth
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
