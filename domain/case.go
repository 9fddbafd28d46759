package domain

import "time"

// Case is an incident under investigation. Each edit writes a new version
// of the row (cases is a ReplacingMergeTree on version).
type Case struct {
	ID        string      `json:"case_id"`
	Name      string      `json:"name"`
	From      time.Time   `json:"window_from"`
	To        time.Time   `json:"window_to"`
	Filters   CaseFilters `json:"filters"`
	Notes     string      `json:"notes"`
	Status    string      `json:"status"`
	LegalHold bool        `json:"legal_hold"`
	CreatedBy string      `json:"created_by"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`
	Version   uint64      `json:"version,string"`
}

// CaseFilters narrow a case beyond its window. Empty lists mean "all".
type CaseFilters struct {
	Tenants   []string `json:"tenants"`
	Nodes     []string `json:"nodes"`
	Analyzers []string `json:"analyzers"`
}

// HoldInfo is who froze a case's evidence and when (the latest hold).
type HoldInfo struct {
	By string    `ch:"last_held_by" json:"held_by"`
	At time.Time `ch:"last_held_at" json:"held_at"`
}

// AffectedListRow is one tenant on a notification list.
type AffectedListRow struct {
	ReconstructionID string `ch:"reconstruction_id" json:"reconstruction_id"`
	CaseID           string `ch:"case_id" json:"case_id"`
	Tenant           string `ch:"tenant" json:"tenant"`
	// StoredRole is affected_role as stored (the table's sort key, used
	// for paging); Role is its one spelling, parsed by ParseRole so
	// rows written by older versions read the same.
	StoredRole string `ch:"affected_role" json:"-"`
	Role       Role   `json:"affected_role"`
	// Tier (exposed rows) and Counterparts (the tenants on the other side)
	// are read when the affected table has those columns.
	Tier         Tier      `json:"tier,omitempty"`
	Counterparts []string  `json:"counterparts,omitempty"`
	Requests     uint64    `ch:"requests" json:"requests"`
	FirstTS      time.Time `ch:"first_ts" json:"first_ts"`
	LastTS       time.Time `ch:"last_ts" json:"last_ts"`
	Models       []string  `ch:"models" json:"models"`
	Nodes        []string  `ch:"nodes" json:"nodes"`
	Confidence   float64   `ch:"confidence" json:"confidence"`
	RequestKeys  []string  `ch:"request_keys" json:"request_keys"`
	FindingIDs   []string  `ch:"finding_ids" json:"finding_ids"`
	CreatedAt    time.Time `ch:"created_at" json:"created_at"`
}

// AffectedKey is the keyset position in one reconstruction's list, which
// is the table's sort key (reconstruction_id, affected_role, tenant).
type AffectedKey struct {
	Role   string `json:"r"`
	Tenant string `json:"t"`
}

// CaseRun is one recorded analyzer execution.
type CaseRun struct {
	RunID      string    `ch:"run_id" json:"run_id"`
	Analyzer   string    `ch:"analyzer" json:"analyzer"`
	Version    string    `ch:"version" json:"version"`
	StartedAt  time.Time `ch:"started_at" json:"started_at"`
	FinishedAt time.Time `ch:"finished_at" json:"finished_at"`
	Status     string    `ch:"status" json:"status"`
	Findings   uint32    `ch:"findings" json:"findings"`
	High       uint32    `ch:"high" json:"high"`
	Error      string    `ch:"error" json:"error"`
}

// NormalizeRoles gives each row its one role spelling. Rows written by
// older versions ("received_foreign_data", "possibly_exposed") are read,
// never written, in those spellings.
func NormalizeRoles(rows []AffectedListRow) {
	for i := range rows {
		r := &rows[i]
		if r.StoredRole == "" {
			r.StoredRole = string(r.Role)
		}
		if role, err := ParseRole(r.StoredRole); err == nil {
			r.Role = role
		} else {
			r.Role = Role(r.StoredRole)
		}
	}
}
