package domain

import "time"

// Claim states: a worker claims a unit of a job (and renews the claim
// with further "claimed" rows while it works), then marks it done, or
// releases it so another worker may take it at once.
const (
	ClaimClaimed  = "claimed"
	ClaimDone     = "done"
	ClaimReleased = "released"
)

// Claim is one row of work_claims: what a worker said about one unit of a
// job (an ingest source, an analysis lane) in one attempt. Rows are only
// ever added; internal/workclaim reads a unit's rows to decide who holds it.
type Claim struct {
	Job     string
	Unit    string
	Worker  string
	Attempt uint32
	State   string
	// At is when the worker wrote the row, by its own clock: the earliest
	// row of an attempt (then the smaller worker name) wins it.
	At time.Time
	// LeaseUntil is when a "claimed" row stops holding the unit unless a
	// later row of the same worker and attempt extends it.
	LeaseUntil time.Time
}
