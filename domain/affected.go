package domain

import (
	"context"
	"time"
)

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

// AffectedStage is a notification list stored while it is folded: each
// row's request keys, finding ids and evidence lines go to the store as
// they are found, so no process holds a whole list, and Save folds them
// into the stored rows, each list sorted and unique. A row is named by
// its role and tenant.
type AffectedStage interface {
	AddKey(ctx context.Context, role Role, tenant, key string) error
	AddFinding(ctx context.Context, role Role, tenant, id string) error
	// AddLines adds evidence lines; 0 is no line.
	AddLines(ctx context.Context, role Role, tenant string, lines []uint64) error
	// Save stores the list under id: rows give every column but those
	// added (each row's own RequestKeys, FindingIDs and Evidence are added
	// to them), and Save sets each row's Requests to the number of its
	// distinct keys. The stage is gone after it, saved or not.
	Save(ctx context.Context, id, caseID string, created time.Time, rows []AffectedRow) error
	// Discard drops what was added, unsaved.
	Discard(ctx context.Context) error
}
