package analyze

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/simulate"
)

type accuracy struct {
	flagged, high map[string]bool // request keys with any / HIGH per-request finding
	listed        map[string]bool // MEDIUM or HIGH: enters the affected list
	received      map[string]bool
	exposed       map[string]bool
	exposedTier   map[string]Tier
	exposedReqs   map[string]Tier // writer request keys on exposed rows, at the row's tier
	report        *Report
}

func runAll(t *testing.T, db *chstore.Store, cfg Config, now time.Time) *accuracy {
	t.Helper()
	r := &Runner{DB: db, Cfg: cfg, Trigger: "test", Now: func() time.Time { return now }}
	rep, err := r.Run(context.Background(), Window{}, nil)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if rep.Errors() {
		for _, x := range rep.Runs {
			if x.Run.Status == StatusError {
				t.Errorf("%s: %s", x.Run.Analyzer, x.Run.Error)
			}
		}
	}
	a := &accuracy{flagged: map[string]bool{}, high: map[string]bool{}, listed: map[string]bool{}, received: map[string]bool{}, exposed: map[string]bool{}, exposedTier: map[string]Tier{}, exposedReqs: map[string]Tier{}, report: rep}
	for _, x := range rep.Runs {
		for _, f := range x.Findings {
			if f.GatewayRequestID == "" {
				continue
			}
			a.flagged[f.GatewayRequestID] = true
			if f.Severity == High || f.Severity == Medium {
				a.listed[f.GatewayRequestID] = true
			}
			if f.Severity == High {
				a.high[f.GatewayRequestID] = true
			}
		}
	}
	for _, row := range storedList(t, db, rep.Reconstruction) {
		switch row.Role {
		case RoleReceived:
			a.received[row.Tenant] = true
		case RoleExposed:
			a.exposed[row.Tenant] = true
			a.exposedTier[row.Tenant] = row.Tier
			for _, k := range row.RequestKeys {
				a.exposedReqs[k] = row.Tier
			}
		}
	}
	for _, p := range rep.Phases {
		t.Logf("phase %-28s %v", p.Name, p.Duration.Round(time.Millisecond))
	}
	return a
}

// runWholeAndSliced analyzes db twice, whole and then in slices of slice
// requests (each run a minute after the last), and hands each report to
// check; a sliced run that is not sliced fails the test.
func runWholeAndSliced(t *testing.T, db *chstore.Store, cfg Config, slice int, check func(slice int, a *accuracy)) {
	t.Helper()
	for i, n := range []int{0, slice} {
		cfg.SliceRequests = n
		a := runAll(t, db, cfg, testNow.Add(time.Duration(i)*time.Minute))
		if n > 0 && a.report.Slices < 2 {
			t.Fatalf("%d slices of %d requests: the sliced run is not sliced", a.report.Slices, n)
		}
		check(n, a)
	}
}

func truthSets(tr *simulate.Truth) (affected map[string]string, look map[string]string) {
	affected, look = map[string]string{}, map[string]string{}
	for _, a := range tr.Affected {
		affected[a.RequestID] = a.Class
	}
	for _, l := range tr.Lookalikes {
		look[l.RequestID] = l.Class
	}
	return affected, look
}

func logGaps(t *testing.T, rep *Report) {
	for _, x := range rep.Runs {
		if x.Run.Analyzer == "completeness" {
			for _, f := range x.Findings {
				t.Logf("gap finding: %s", f.Title)
			}
		}
	}
}

// exposureScore is exposed-tenant recall and precision against the truth,
// for the rows whose tier is in tiers.
func exposureScore(a *accuracy, truth []string, tiers ...Tier) (recall, precision float64, n int) {
	want := map[string]bool{}
	for _, t := range truth {
		want[t] = true
	}
	hit := 0
	for tn, tr := range a.exposedTier {
		if !slices.Contains(tiers, tr) {
			continue
		}
		n++
		if want[tn] {
			hit++
		}
	}
	recall, precision = 1, 1
	if len(want) > 0 {
		recall = float64(hit) / float64(len(want))
	}
	if n > 0 {
		precision = float64(hit) / float64(n)
	}
	return recall, precision, n
}

// requestExposureScore is the same at request level: the writer requests
// named on exposed rows against the truth's foreign sources. A row's tier
// is its tenant's best, so this is an upper bound for lower tiers.
func requestExposureScore(a *accuracy, tr *simulate.Truth, tiers ...Tier) (recall, precision float64, n int) {
	want := map[string]bool{}
	for _, x := range tr.Affected {
		for _, s := range x.Sources {
			if s.Tenant != x.Tenant {
				want[s.RequestID] = true
			}
		}
	}
	hit := 0
	for k, t := range a.exposedReqs {
		if !slices.Contains(tiers, t) {
			continue
		}
		n++
		if want[k] {
			hit++
		}
	}
	recall, precision = 1, 1
	if len(want) > 0 {
		recall = float64(hit) / float64(len(want))
	}
	if n > 0 {
		precision = float64(hit) / float64(n)
	}
	return recall, precision, n
}
