package posture

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
)

// Bug is one entry of the known-bug table (knownbugs.json).
type Bug struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Class   string `json:"class"`
	Summary string `json:"summary"`
	// Roles are the node roles whose version and settings decide exposure.
	Roles []string `json:"roles"`
	// Requires lists conditions of the boot: "pd" (disaggregation on),
	// "pool_below_context" (max_req_input_len below the context length).
	Requires []string `json:"requires"`
	// MitigatedBy names a setting that closes the window on an unfixed
	// version: "deferred_release" or "read_check".
	MitigatedBy string `json:"mitigated_by,omitempty"`
	// FixedIn is the first release with the fix, set only when confirmed.
	FixedIn   string   `json:"fixed_in,omitempty"`
	FollowUps []string `json:"follow_ups,omitempty"`
	FixStatus string   `json:"fix_status"`
	FixSource string   `json:"fix_source,omitempty"`
	Sources   []Source `json:"sources"`
}

// Source is a citation of a bug entry.
type Source struct {
	URL  string `json:"url"`
	Note string `json:"note"`
}

//go:embed knownbugs.json
var knownBugsJSON []byte

// KnownBugs returns the embedded table, validated.
func KnownBugs() ([]Bug, error) { return parseBugs(knownBugsJSON) }

func parseBugs(data []byte) ([]Bug, error) {
	var doc struct {
		Bugs []Bug `json:"bugs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("known bugs: %w", err)
	}
	seen := map[string]bool{}
	for i, b := range doc.Bugs {
		switch {
		case b.ID == "" || seen[b.ID]:
			return nil, fmt.Errorf("known bugs: entry %d: missing or duplicate id %q", i, b.ID)
		case len(b.Sources) == 0:
			return nil, fmt.Errorf("known bugs: %s: no source", b.ID)
		case len(b.Roles) == 0:
			return nil, fmt.Errorf("known bugs: %s: no roles", b.ID)
		}
		for _, r := range b.Requires {
			if r != "pd" && r != "pool_below_context" {
				return nil, fmt.Errorf("known bugs: %s: unknown condition %q", b.ID, r)
			}
		}
		if m := b.MitigatedBy; m != "" && m != "deferred_release" && m != "read_check" {
			return nil, fmt.Errorf("known bugs: %s: unknown mitigation %q", b.ID, m)
		}
		for _, v := range append([]string{b.FixedIn}, b.FollowUps...) {
			if _, ok := ParseVersion(v); v != "" && !ok {
				return nil, fmt.Errorf("known bugs: %s: bad version %q", b.ID, v)
			}
		}
		for _, s := range b.Sources {
			if s.URL == "" {
				return nil, fmt.Errorf("known bugs: %s: source without url", b.ID)
			}
		}
		seen[b.ID] = true
	}
	return doc.Bugs, nil
}

// Exposure statuses, from worst to best.
const (
	Exposed       = "exposed"   // condition present, version unfixed (or no fixed release known), not mitigated
	Unknown       = "unknown"   // a value exposure depends on was not logged
	Mitigated     = "mitigated" // unfixed, but the mitigating setting is on
	ConditionOff  = "condition_absent"
	Fixed         = "fixed"          // version at or above the fix release
	NotApplicable = "not_applicable" // other role, or not PD
)

// Exposure is one bug's verdict for one boot.
type Exposure struct {
	BugID   string   `json:"bug_id"`
	Title   string   `json:"title"`
	Class   string   `json:"class"`
	Status  string   `json:"status"`
	Reason  string   `json:"reason"`
	FixedIn string   `json:"fixed_in,omitempty"`
	Sources []Source `json:"sources"`
}

// evaluate decides b's exposure for the boot p. Every "unknown" input
// makes the verdict unknown rather than a guess.
func evaluate(b Bug, p *BootPosture) Exposure {
	e := Exposure{BugID: b.ID, Title: b.Title, Class: b.Class, FixedIn: b.FixedIn, Sources: b.Sources}
	set := func(status, reason string) Exposure { e.Status, e.Reason = status, reason; return e }
	role := p.Role
	if p.PDMode.Known() && (p.PDMode.Value == "prefill" || p.PDMode.Value == "decode") {
		role = p.PDMode.Value
	}
	if role != "" && role != "unknown" && !slices.Contains(b.Roles, role) && !(p.PDMode.Value == "none") {
		return set(NotApplicable, fmt.Sprintf("affects %v nodes; this is a %s node", b.Roles, role))
	}
	for _, c := range b.Requires {
		switch c {
		case "pd":
			if !p.PDMode.Known() {
				return set(Unknown, "disaggregation mode not logged (no server_args line)")
			}
			if p.PDMode.Value == "none" {
				return set(NotApplicable, "not a PD node (disaggregation_mode='null')")
			}
		case "pool_below_context":
			if !p.PoolBelowContext.Known() {
				return set(Unknown, "KV pool or context length not logged")
			}
			if p.PoolBelowContext.Value != "yes" {
				return set(ConditionOff, "max_req_input_len is not below the context length: no prompt reaches the rejection path")
			}
		}
	}
	if b.FixedIn != "" {
		fix, _ := ParseVersion(b.FixedIn)
		if !p.Version.Known() {
			return set(Unknown, "condition present; SGLang version not logged, fixed in "+b.FixedIn)
		}
		if v, ok := ParseVersion(p.Version.Value); ok && v.Compare(fix) >= 0 {
			return set(Fixed, fmt.Sprintf("version %s includes the fix (%s)", p.Version.Value, b.FixedIn))
		}
	}
	noFix := "no release with the fix is confirmed"
	if b.FixedIn != "" {
		noFix = fmt.Sprintf("version %s is below the fix release %s", p.Version.Value, b.FixedIn)
	}
	switch b.MitigatedBy {
	case "deferred_release":
		switch p.DeferredRelease.Value {
		case "on":
			if n := p.ReleaseTimeouts; n > 0 {
				// decode.py resolve_deferred_releases: past the timeout
				// the pages are released without the drain ack.
				return set(Exposed, fmt.Sprintf("%s; deferred KV release is on, but timed out %d times on this boot and released those pages without the prefill's drain ack", noFix, n))
			}
			return set(Mitigated, noFix+"; deferred KV release is on")
		case "off":
			return set(Exposed, noFix+"; deferred KV release is off")
		default:
			return set(Unknown, noFix+"; deferred KV release not logged")
		}
	case "read_check":
		if p.ReadCheck.Value == "present" {
			return set(Mitigated, noFix+"; the decode metadata read check is present (a collision aborts instead of serving)")
		}
		return set(Unknown, noFix+"; whether this version has the metadata read check is not logged")
	}
	return set(Exposed, noFix)
}
