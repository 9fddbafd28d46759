package analyze

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/simulate"
)

// TestSlicedAnalysisEqualsWhole analyzes the same incidents read whole and
// read in many slices: every finding (ids, severities, confidences, texts,
// evidence, foreign tenants) and every notification-list row must be the
// same; and a lean run (Runner.Lean) stores the same findings and list.
func TestSlicedAnalysisEqualsWhole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sim   simulate.Config
		pages bool
		// noReplay sends every victim to the node-window fallback, which
		// a sliced run reads back from request_facts and the decode
		// Receive lines, where a whole run takes its linked requests.
		noReplay bool
		// lean also runs the analysis lean and compares what it stores.
		lean bool
	}{
		{"incident-2026 with page events", simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.1, PageEvents: true}, true, false, true},
		{"abort race", simulate.Config{Scenario: "abort-race", Seed: 11, Scale: 0.25, DecodePool: 12_288}, false, false, false},
		{"mixed", simulate.Config{Scenario: "mixed", Seed: 1, Scale: 0.25, PageEvents: true}, false, false, false},
		{"incident-2026 without a replay", simulate.Config{Scenario: "incident-2026", Seed: 2, Scale: 0.1}, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, _ := loaded(t, tc.sim)
			cfg := DefaultConfig()
			cfg.DeferredRelease = "off"
			cfg.ignorePages = !tc.pages
			cfg.SkipReplay = tc.noReplay
			run := func(sliceReq int, now time.Time, lean bool) *Report {
				c := cfg
				c.SliceRequests = sliceReq
				r := &Runner{DB: db, Cfg: c, Trigger: "test", Now: func() time.Time { return now }, Lean: lean}
				t0 := time.Now()
				rep, err := r.Run(context.Background(), Window{}, nil)
				if err != nil {
					t.Fatalf("run (slices of %d): %v", sliceReq, err)
				}
				t.Logf("slices of %d (lean %v): %d slices in %v", sliceReq, lean, rep.Slices, time.Since(t0))
				withStoredList(t, db, rep)
				for _, x := range rep.Runs {
					if x.Run.Status == StatusError {
						t.Fatalf("%s: %s", x.Run.Analyzer, x.Run.Error)
					}
				}
				return rep
			}
			whole := run(-1, testNow, false)
			sliced := run(400, testNow.Add(time.Minute), false)
			if whole.Slices != 1 || sliced.Slices < 5 {
				t.Fatalf("slices: whole %d, sliced %d (want 1 and at least 5)", whole.Slices, sliced.Slices)
			}
			total := 0
			for i := range whole.Runs {
				a, b := whole.Runs[i], sliced.Runs[i]
				total += len(a.Findings)
				if len(a.Findings) != len(b.Findings) {
					t.Errorf("%s: %d findings whole, %d sliced", a.Run.Analyzer, len(a.Findings), len(b.Findings))
					continue
				}
				for j := range a.Findings {
					fa, fb := a.Findings[j], b.Findings[j]
					fa.RunID, fb.RunID = "", ""
					if d := findingDiff(fa, fb); d != "" {
						t.Errorf("%s finding %s: %s", a.Run.Analyzer, fa.ID, d)
					}
				}
			}
			if total == 0 {
				t.Fatal("the incident gave no findings: nothing was compared")
			}
			if !reflect.DeepEqual(whole.Reconstruction.Rows, sliced.Reconstruction.Rows) {
				t.Errorf("notification list differs:\nwhole  %+v\nsliced %+v", whole.Reconstruction.Rows, sliced.Reconstruction.Rows)
			}
			if tc.noReplay {
				possible := 0
				for _, row := range whole.Reconstruction.Rows {
					if row.Role == RoleExposed && row.Tier == Possible {
						possible += row.Requests
					}
				}
				if possible == 0 {
					t.Error("no possible exposed request: the node-window fallback was not exercised")
				}
				t.Logf("node-window fallback: %d possible exposed requests", possible)
			}
			// Lean (the CLI's run): the report carries counts only, and
			// what it stores is what the sliced run stored. What lean
			// leaves out does not depend on the scenario, so one scenario
			// checks it (each lean run is a third analysis of its incident).
			if tc.lean {
				lean := run(400, testNow.Add(2*time.Minute), true)
				for i := range sliced.Runs {
					a, b := sliced.Runs[i], lean.Runs[i]
					if b.Findings != nil || b.New != nil {
						t.Errorf("%s: the lean report holds %d findings, %d new", b.Run.Analyzer, len(b.Findings), len(b.New))
					}
					if a.Run.Findings != b.Run.Findings || a.Run.High != b.Run.High || a.NewCount != len(a.New) || b.NewCount != 0 {
						t.Errorf("%s: sliced %d findings (%d high, %d new), lean %d (%d high, %d new; all known)", a.Run.Analyzer,
							a.Run.Findings, a.Run.High, a.NewCount, b.Run.Findings, b.Run.High, b.NewCount)
					}
					stored := func(id string) map[string]Finding {
						fs, err := db.FindingsOfRuns(context.Background(), []string{id})
						if err != nil {
							t.Fatal(err)
						}
						m := map[string]Finding{}
						for _, f := range fs {
							f.RunID = ""
							m[f.ID] = f
						}
						return m
					}
					sa, sb := stored(a.Run.ID), stored(b.Run.ID)
					if len(sa) != a.Run.Findings || len(sb) != len(sa) {
						t.Errorf("%s: stored %d findings sliced (report %d), %d lean", a.Run.Analyzer, len(sa), a.Run.Findings, len(sb))
					}
					for id, fa := range sa {
						if d := findingDiff(fa, sb[id]); d != "" {
							t.Errorf("%s finding %s stored sliced vs lean: %s", a.Run.Analyzer, id, d)
							break
						}
					}
				}
				if !reflect.DeepEqual(sliced.Reconstruction.Rows, lean.Reconstruction.Rows) {
					t.Errorf("notification list differs lean vs sliced")
				}
			}
			t.Logf("%d findings, %d list rows, %d slices", total, len(whole.Reconstruction.Rows), sliced.Slices)
			for _, rep := range []*Report{whole, sliced} {
				for _, p := range rep.Phases {
					t.Logf("  %d slices: %s %s", rep.Slices, p.Name, p.Duration.Round(time.Millisecond))
				}
			}
		})
	}
}

// findingDiff names the first fields that differ.
func findingDiff(a, b Finding) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	out := ""
	for i := 0; i < va.NumField(); i++ {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out += fmt.Sprintf("%s: whole %v, sliced %v; ", va.Type().Field(i).Name, va.Field(i).Interface(), vb.Field(i).Interface())
		}
	}
	return out
}
