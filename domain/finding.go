package domain

import (
	"sort"
	"time"
)

// Window is the half-open time range [From, To) a run covers: requests
// that started in it. Zero values mean "all data".
type Window struct {
	From, To time.Time
}

func (w Window) String() string {
	return w.From.UTC().Format(time.RFC3339) + "/" + w.To.UTC().Format(time.RFC3339)
}

// Contains reports whether t is in [From, To).
func (w Window) Contains(t time.Time) bool {
	return !t.Before(w.From) && t.Before(w.To)
}

// Run statuses (Timesketch contract).
const (
	StatusSuccess    = "SUCCESS"
	StatusNoFindings = "NO_FINDINGS"
	StatusError      = "ERROR"
)

// Finding is one conclusion of one analyzer run, with the raw lines
// (raw_lines.line_id) that prove it.
//
// A finding's ID is a hash of its analyzer, the analyzer's version and its
// Subject, so re-running an analyzer over data it has seen yields the same
// IDs; its times are the evidence's times, never the wall clock.
type Finding struct {
	ID               string
	RunID            string
	Analyzer         string
	AnalyzerVersion  string
	Severity         Severity
	Confidence       float64
	TS               time.Time
	FirstTS, LastTS  time.Time
	RequestKey       string
	GatewayRequestID string
	Tenant           string
	Room             uint64
	PrefillNode      string
	DecodeNode       string
	DecodeDPRank     int16
	RIDs             []string
	Title            string
	Explanation      string
	// GroupKey groups findings about one cause (a node boot, an abort).
	GroupKey string
	// ForeignTenants / ForeignRequestKeys name the other side: tenants and
	// requests whose data this request may have read (or, for an abort,
	// the requests that may have read this one's).
	ForeignTenants     []string
	ForeignRequestKeys []string
	Evidence           []uint64
	// Details are extra facts as key/value pairs (numbers as text).
	Details map[string]string
	// Subject identifies what the finding is about; with the analyzer and
	// its version it determines ID. Not stored: it is only the ID's input.
	Subject string `json:"-"`
}

// SortFindings orders findings by analyzer, time and id: the order of the
// current findings every reader gets.
func SortFindings(fs []Finding) {
	sort.Slice(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Analyzer != b.Analyzer {
			return a.Analyzer < b.Analyzer
		}
		if !a.TS.Equal(b.TS) {
			return a.TS.Before(b.TS)
		}
		return a.ID < b.ID
	})
}
