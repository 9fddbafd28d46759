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
