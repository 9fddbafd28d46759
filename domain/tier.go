package domain

import "strings"

// Tier says how certain an exposure is. Every exposed row carries one, so a
// compliance team can decide whom to notify first and on what grounds.
type Tier string

// Exposure tiers, most certain first.
const (
	// Confirmed: page-level events show the foreign request read the page
	// the tenant's data was written to.
	Confirmed Tier = "confirmed"
	// Likely: the allocator replay names the tenant as the page's writer
	// under every event order consistent with the logs.
	Likely Tier = "likely"
	// Possible: a writer under some consistent order, or a tenant served
	// on the same node and rank in the window when no replay is possible.
	Possible Tier = "possible"
)

// Tiers lists the tiers, most certain first.
var Tiers = []Tier{Confirmed, Likely, Possible}

// Rank orders tiers: confirmed is 0; the zero Tier sorts last.
func (t Tier) Rank() int {
	for i, v := range Tiers {
		if v == t {
			return i
		}
	}
	return len(Tiers)
}

// ParseTier accepts a tier name in any case; "" is the zero Tier (no
// filter).
func ParseTier(s string) (Tier, error) {
	v := Tier(strings.ToLower(strings.TrimSpace(s)))
	if v == "" {
		return "", nil
	}
	if v.Rank() == len(Tiers) {
		return "", Errorf(Invalid, "unknown tier %q (want confirmed, likely or possible)", s)
	}
	return v, nil
}
