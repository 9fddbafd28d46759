// Package analyze turns ingested evidence into conclusions: it links each
// client request across gateway, prefill, transfer and decode
// (request_facts), runs analyzers that each record a run and findings with
// the raw lines that prove them, and folds findings into the per-tenant
// notification list (affected).
//
// Everything here is deterministic: the same data and parameters give the
// same finding ids, the same findings and the same affected rows, so a run
// can be repeated and compared by anyone holding the evidence.
package analyze

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// The domain's vocabulary, under the names analyze has always used.
type (
	Severity = domain.Severity
	Window   = domain.Window
	Finding  = domain.Finding
)

// Severities, most urgent first.
const (
	High   = domain.High
	Medium = domain.Medium
	Low    = domain.Low
	Note   = domain.Note
)

// Severities lists the valid severities, most urgent first.
var Severities = domain.Severities

// Run statuses (Timesketch contract).
const (
	StatusSuccess    = domain.StatusSuccess
	StatusNoFindings = domain.StatusNoFindings
	StatusError      = domain.StatusError
)

// Analyzer is one unit of analysis. Analyzers read the shared Dataset
// (loaded in bulk once per run) and may read more evidence through
// Dataset.DB (the store's typed reads, no SQL); they must be deterministic.
type Analyzer interface {
	Name() string
	Version() string
	// Params returns the parameters the analyzer ran with (recorded, as
	// JSON, in analyzer_runs.params).
	Params() any
	Analyze(ctx context.Context, d *Dataset) ([]Finding, error)
}

// findingID is hash(analyzer, version, Subject): stable across re-runs,
// different for a new analyzer version.
func findingID(analyzer, version, subject string) string {
	h := sha256.Sum256([]byte(analyzer + "\x00" + version + "\x00" + subject))
	return hex.EncodeToString(h[:16])
}

// finalize fills the derived fields of fs and sorts them by ID.
func finalize(a Analyzer, fs []Finding) []Finding {
	out := finalizeNew(a, fs, map[string]bool{})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// finalizeNew is finalize without the sort, for findings that come in
// parts: it normalizes fs in place and keeps those whose id is not in seen
// yet (the first copy wins), adding their ids to seen.
func finalizeNew(a Analyzer, fs []Finding, seen map[string]bool) []Finding {
	out := fs[:0]
	for _, f := range fs {
		f.Analyzer, f.AnalyzerVersion = a.Name(), a.Version()
		if f.Subject == "" {
			f.Subject = f.RequestKey
		}
		f.ID = findingID(f.Analyzer, f.AnalyzerVersion, f.Subject)
		if seen[f.ID] {
			continue
		}
		seen[f.ID] = true
		if f.FirstTS.IsZero() {
			f.FirstTS = f.TS
		}
		if f.LastTS.IsZero() {
			f.LastTS = f.TS
		}
		f.Evidence = uniqSortedU64(f.Evidence)
		f.RIDs = uniqSortedStr(f.RIDs)
		f.ForeignTenants = uniqSortedStr(f.ForeignTenants)
		f.ForeignRequestKeys = uniqSortedStr(f.ForeignRequestKeys)
		f.Confidence = clamp01(f.Confidence)
		out = append(out, f)
	}
	return out
}

// uniqSortedU64 is v's non-zero values, sorted, each once, in a new
// slice. The reconstruction folds every victim's evidence through it: at
// 2M requests sort.Slice's reflective swaps made it 1.1 CPU-seconds.
func uniqSortedU64(v []uint64) []uint64 {
	out := make([]uint64, 0, len(v))
	for _, x := range v {
		if x != 0 {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func uniqSortedStr(v []string) []string {
	out := make([]string, 0, len(v))
	for _, x := range v {
		if x != "" {
			out = append(out, x)
		}
	}
	sort.Strings(out)
	n := 0
	for i, x := range out {
		if i == 0 || x != out[n-1] {
			out[n] = x
			n++
		}
	}
	return out[:n]
}

func clamp01(x float64) float64 {
	switch {
	case x < 0:
		return 0
	case x > 1:
		return 1
	}
	return x
}

// commas renders an integer with thousands separators (703,366), the way
// responders read token counts.
func commas(n uint64) string {
	s := itoa(n)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

func itoa(n uint64) string {
	if n == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return string(buf[i:])
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}
