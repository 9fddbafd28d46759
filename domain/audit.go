package domain

import "time"

// AuditEntry is one row of the append-only audit_log.
type AuditEntry struct {
	TS          time.Time `ch:"ts" json:"ts"`
	TSNS        uint64    `ch:"ts_ns" json:"ts_ns,string"`
	User        string    `ch:"user" json:"user"`
	Role        string    `ch:"role" json:"role"`
	Action      string    `ch:"action" json:"action"`
	Params      string    `ch:"params" json:"params"`
	ResultCount int64     `ch:"result_count" json:"result_count"`
	Status      uint16    `ch:"status" json:"status"`
	RemoteAddr  string    `ch:"remote_addr" json:"remote_addr"`
}

// AuditQuery filters the audit log; Before is the keyset cursor (ts_ns).
type AuditQuery struct {
	User   string `json:"user,omitempty"`
	Action string `json:"action,omitempty"`
	// Tenant: entries whose parameters name this tenant (a request,
	// search, finding or tenant view of it).
	Tenant string `json:"tenant,omitempty"`
	From   time.Time
	To     time.Time
	Before uint64 `json:"-"`
	Limit  int    `json:"limit"`
}

// AuditPage is one page of the audit log, newest first.
type AuditPage struct {
	Query   AuditQuery   `json:"query"`
	Entries []AuditEntry `json:"entries"`
	Total   uint64       `json:"total"`
	Next    string       `json:"next,omitempty"`
}
