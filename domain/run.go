package domain

import (
	"sort"
	"time"
)

// Run is one analyzer's pass over a window, as recorded in analyzer_runs.
type Run struct {
	ID        string
	Analyzer  string
	Version   string
	Params    string
	Window    Window
	Watermark time.Time
	Started   time.Time
	Finished  time.Time
	Status    string
	Findings  int
	High      int
	Error     string
	Trigger   string
	CaseID    string
}

// TriggerLive marks the runs of serve's live analysis rounds: they record
// only findings no run had, and never supersede an analysis.
const TriggerLive = "serve"

// LatestRuns picks, per analyzer, the latest run that did not fail (the
// latest version wins among runs started in the same second).
func LatestRuns(runs []Run) map[string]Run {
	out := map[string]Run{}
	for _, r := range runs {
		if r.Status == StatusError {
			continue
		}
		cur, ok := out[r.Analyzer]
		if !ok || r.Started.After(cur.Started) || (r.Started.Equal(cur.Started) && r.Version > cur.Version) {
			out[r.Analyzer] = r
		}
	}
	return out
}

// CurrentRunIDs is the one rule for "the current findings", read the same
// way by the CLI, the reconstruction, the UI and the API: per analyzer,
// its latest run that was not a live round (a new analysis supersedes the
// previous one, findings it no longer makes included), plus the live
// rounds after it that recorded findings (a live round records only
// findings no run had). Sorted.
func CurrentRunIDs(runs []Run) []string {
	var full, live []Run
	for _, r := range runs {
		if r.Trigger == TriggerLive {
			live = append(live, r)
		} else {
			full = append(full, r)
		}
	}
	base := LatestRuns(full)
	ids := []string{}
	for _, r := range base {
		ids = append(ids, r.ID)
	}
	for _, r := range live {
		if r.Status == StatusError || r.Findings == 0 {
			continue
		}
		if b, ok := base[r.Analyzer]; !ok || (r.Version == b.Version && r.Started.After(b.Started)) {
			ids = append(ids, r.ID)
		}
	}
	sort.Strings(ids)
	return ids
}
