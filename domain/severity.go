package domain

import (
	"fmt"
	"strings"
)

// Severity is the Timesketch-style priority of a finding.
type Severity string

// Severities, most urgent first.
const (
	High   Severity = "HIGH"
	Medium Severity = "MEDIUM"
	Low    Severity = "LOW"
	Note   Severity = "NOTE"
)

// Severities lists the valid severities, most urgent first.
var Severities = []Severity{High, Medium, Low, Note}

// Rank orders severities: HIGH is 0, an unknown severity sorts last.
func (s Severity) Rank() int {
	for i, v := range Severities {
		if v == s {
			return i
		}
	}
	return len(Severities)
}

// AtLeast reports whether s is as urgent as min or more.
func (s Severity) AtLeast(min Severity) bool { return s.Rank() <= min.Rank() }

// SeverityFloor is, by analyzer, the least severity a reader keeps; an
// analyzer it does not name keeps nothing. It is what a reader can ask the
// server to filter by, so the findings it passes over are not sent.
type SeverityFloor map[string]Severity

// Keeps reports whether a finding of analyzer at severity s passes f.
func (f SeverityFloor) Keeps(analyzer string, s Severity) bool {
	min, ok := f[analyzer]
	return ok && s.AtLeast(min)
}

// ParseSeverity accepts a severity in any letter case ("high", "HIGH").
func ParseSeverity(s string) (Severity, error) {
	v := Severity(strings.ToUpper(strings.TrimSpace(s)))
	if v.Rank() == len(Severities) {
		return "", Errorf(Invalid, "unknown severity %q (want one of HIGH, MEDIUM, LOW, NOTE)", s)
	}
	return v, nil
}

// String implements fmt.Stringer.
func (s Severity) String() string { return string(s) }

var _ fmt.Stringer = Severity("")
