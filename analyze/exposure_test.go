package analyze

import (
	"slices"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/simulate"
)

// TestExposureLoads measures exposed-tenant recall and precision against
// the simulator's truth at two decode loads: a pool barely above the
// context length, where every long prompt leaves free_pages short and
// released pages are merged often (nearly full), and the default pool,
// where a merge waits for a lap through the whole pool (mostly empty).
// Each load runs with and without page events. 120 tenants, so that the
// exposed set is a strict subset and precision means something.
func TestExposureLoads(t *testing.T) {
	for li, load := range []struct {
		name string
		pool int
	}{{"nearly-full", 1_245_184}, {"mostly-empty", 0}} {
		t.Run(load.name, func(t *testing.T) {
			db, tr := loaded(t, simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.1, Tenants: 120,
				PageEvents: true, DecodePool: load.pool})
			if len(tr.PossiblyExposed) == 0 {
				t.Fatal("no exposed tenants in the truth")
			}
			for i, pages := range []bool{false, true} {
				name := "estimated"
				if pages {
					name = "page-events"
				}
				t.Run(name, func(t *testing.T) {
					cfg := DefaultConfig()
					cfg.ignorePages = !pages
					a := runAll(t, db, cfg, testNow.Add(time.Duration(li*10+i)*time.Minute))
					if got := keysOf(a.received); !slices.Equal(got, tr.ReceivedForeignData) {
						t.Errorf("received foreign data = %v, want %v", got, tr.ReceivedForeignData)
					}
					checkExposure(t, a, tr)
					if pages {
						for tn, tier := range a.exposedTier {
							if tier != Confirmed && slices.Contains(tr.PossiblyExposed, tn) {
								t.Errorf("with page events, truly exposed %s is %s, want confirmed", tn, tier)
							}
						}
					}
				})
			}
		})
	}
}

// TestExposureAtPageSizeOne is TestExposureLoads' nearly full pool at
// SGLang's default page size of one token, where decode allocates with
// TokenToKVPoolAllocator (its own merge condition; the simulator's and the
// replay's models of it are each written from SGLang's source). Without
// page events only: they would be a line per token, gigabytes at this
// scale.
func TestExposureAtPageSizeOne(t *testing.T) {
	db, tr := loaded(t, simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.1, Tenants: 120,
		DecodePool: 1_245_184, PageSize: 1})
	if len(tr.PossiblyExposed) == 0 || len(tr.ReceivedForeignData) == 0 {
		t.Fatal("no exposed or receiving tenants in the truth")
	}
	cfg := DefaultConfig()
	a := runAll(t, db, cfg, testNow.Add(30*time.Minute))
	if got := keysOf(a.received); !slices.Equal(got, tr.ReceivedForeignData) {
		t.Errorf("received foreign data = %v, want %v", got, tr.ReceivedForeignData)
	}
	checkExposure(t, a, tr)
}

// TestExposureRetractions: SGLang logs retractions only as counts (no
// request, no time), so the replay cannot place them: a retracted request
// is replayed as holding its pages from Receive to Finish, while SGLang
// freed them (its data still in them) and preallocated new ones on resume,
// which also moves later allocations. At ten times the incident's rate, on
// a nearly full pool (frequent merges), the all-tier recall target (0.99)
// is not met without page events (0.98 measured: one tenant of 49); the
// test pins what holds (received exact, confirmed+likely >= 0.9 / 0.9,
// all tiers recall >= 0.95) so a regression shows, and, with page events,
// every target.
func TestExposureRetractions(t *testing.T) {
	db, tr := loaded(t, simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.1, Tenants: 120,
		PageEvents: true, DecodePool: 1_245_184, Retractions: 0.02})
	if len(tr.PossiblyExposed) == 0 {
		t.Fatal("no exposed tenants in the truth")
	}
	for i, pages := range []bool{false, true} {
		name := "estimated"
		if pages {
			name = "page-events"
		}
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ignorePages = !pages
			a := runAll(t, db, cfg, testNow.Add(time.Duration(30+i)*time.Minute))
			if got := keysOf(a.received); !slices.Equal(got, tr.ReceivedForeignData) {
				t.Errorf("received foreign data = %v, want %v", got, tr.ReceivedForeignData)
			}
			if pages {
				checkExposure(t, a, tr)
				return
			}
			rAll, pAll, nAll := exposureScore(a, tr.PossiblyExposed, Confirmed, Likely, Possible)
			rCL, pCL, nCL := exposureScore(a, tr.PossiblyExposed, Confirmed, Likely)
			t.Logf("exposed truth %d: all tiers %d rows recall %.3f precision %.3f; confirmed+likely %d rows recall %.3f precision %.3f",
				len(tr.PossiblyExposed), nAll, rAll, pAll, nCL, rCL, pCL)
			if rAll < 0.95 || pAll < 0.4 {
				t.Errorf("all tiers: recall %.3f precision %.3f, want >= 0.95 (the retraction limit) and >= 0.4", rAll, pAll)
			}
			if rCL < 0.9 || pCL < 0.9 {
				t.Errorf("confirmed+likely: recall %.3f precision %.3f, want >= 0.9 and >= 0.9", rCL, pCL)
			}
		})
	}
}
