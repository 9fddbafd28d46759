package domain

import "time"

// AffectedRow is one line of the notification list: one tenant on one side
// of the incident (and, for the exposed side, at one tier).
type AffectedRow struct {
	Tenant string
	Role   Role
	// Tier is set on exposed rows; received rows are decided by findings
	// and carry no tier.
	Tier        Tier
	Requests    int
	First, Last time.Time
	Models      []string
	Nodes       []string
	Confidence  float64
	RequestKeys []string
	FindingIDs  []string
	// Counterparts are the tenants on the other side: for a received row,
	// whose data the tenant received; for an exposed row, who received the
	// tenant's data.
	Counterparts []string
	// PromptTokens / OutputTokens estimate how much of the tenant's prompt
	// and generated output sat in the leaked pages (exposed rows).
	PromptTokens, OutputTokens int64
	// OwnDataOnly marks a received row whose stale pages held only the
	// tenant's own earlier data: affected, but nothing foreign.
	OwnDataOnly bool
	Evidence    []uint64
}

// Gap is a stretch of time in which a node's logs are missing or thin.
type Gap struct {
	Node     string
	Source   string
	From, To time.Time
	Reason   string
}
