package analyze

import (
	"fmt"
	"sort"

	"github.com/kvtrail/kvtrail/domain"
)

// Registration is how an analyzer joins kvtrail: one Register call in the
// analyzer's own file, so adding an analyzer touches that file and its
// test, nothing else.
type Registration struct {
	// Order places the analyzer in a run (and in reports): lower first.
	Order int
	// New builds the analyzer from the analyze config.
	New func(Config) Analyzer
	// Victims, when set, says the analyzer marks victims: its findings at
	// this severity or above mean "this response was built from KV that was
	// not this request's own", and the notification list is built from
	// them. Empty: its findings describe conditions, not victims.
	Victims Severity
}

var registry = map[string]Registration{}

// Register adds an analyzer. It panics on a duplicate name, which is a
// programming error caught by every test run.
func Register(r Registration) {
	name := r.New(DefaultConfig()).Name()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("analyze: analyzer %q registered twice", name))
	}
	registry[name] = r
}

// All returns every registered analyzer, configured by cfg, in run order.
func All(cfg Config) []Analyzer {
	regs := make([]Registration, 0, len(registry))
	for _, r := range registry {
		regs = append(regs, r)
	}
	sort.Slice(regs, func(i, j int) bool { return regs[i].Order < regs[j].Order })
	out := make([]Analyzer, len(regs))
	for i, r := range regs {
		out[i] = r.New(cfg)
	}
	return out
}

// VictimSeverity is the least severity at which the named analyzer's
// findings mark victims; ok is false for analyzers that mark none.
func VictimSeverity(analyzer string) (min Severity, ok bool) {
	r, found := registry[analyzer]
	if !found || r.Victims == "" {
		return "", false
	}
	return r.Victims, true
}

// victimFloor is, by analyzer, the least severity at which its findings
// mark victims: what the reconstruction asks the server for.
func victimFloor() domain.SeverityFloor {
	f := domain.SeverityFloor{}
	for name, r := range registry {
		if r.Victims != "" {
			f[name] = r.Victims
		}
	}
	return f
}

// marksVictim reports whether f, a finding of analyzer, makes its request
// a victim of the reconstruction: the analyzer marks victims, at f's
// severity or above. (A slice's findings do not carry their analyzer's
// name yet: finalize sets it.)
func marksVictim(analyzer string, f *Finding) bool {
	minSev, ok := VictimSeverity(analyzer)
	return ok && f.Severity.AtLeast(minSev) && f.RequestKey != ""
}
