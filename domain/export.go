package domain

import "time"

// Export is a notification-list export job and, when done, its manifest.
type Export struct {
	ID          string          `json:"export_id"`
	CaseID      string          `json:"case_id"`
	RequestedBy string          `json:"requested_by"`
	CreatedAt   time.Time       `json:"created_at"`
	Status      string          `json:"status"` // running, done, failed; interrupted is derived on read (withProgress)
	Rows        uint64          `json:"rows"`
	Manifest    *ExportManifest `json:"manifest,omitempty"`
	// ManifestSHA256 is the digest of manifest.json as written to disk.
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
	Error          string `json:"error,omitempty"`
	Version        uint64 `json:"-"`
	// Done and Total are the progress of a running job (rows written of rows
	// to write), known only to the instance running it.
	Done  uint64 `json:"progress_done"`
	Total uint64 `json:"progress_total"`
}

// Manifest describes an export so it can be checked and defended later.
type ExportManifest struct {
	ExportID         string              `json:"export_id"`
	CaseID           string              `json:"case_id"`
	CaseName         string              `json:"case_name"`
	Filter           ExportFilter        `json:"filter"`
	AnalyzerVersions map[string][]string `json:"analyzer_versions"`
	RowCount         uint64              `json:"row_count"`
	Received         int                 `json:"received"`
	Exposed          int                 `json:"exposed"`
	// ExposedByTier counts the exported exposed rows of each tier.
	ExposedByTier  map[Tier]int `json:"exposed_by_tier"`
	Tenants        int          `json:"tenants"`
	Files          []ExportFile `json:"files"`
	User           string       `json:"user"`
	Role           string       `json:"role"`
	StartedAt      time.Time    `json:"started_at"`
	FinishedAt     time.Time    `json:"finished_at"`
	KvtrailVersion string       `json:"kvtrail_version"`
}

// ExportFilter is what selected the rows.
type ExportFilter struct {
	WindowFrom       time.Time `json:"window_from"`
	WindowTo         time.Time `json:"window_to"`
	Tenants          []string  `json:"tenants"`
	Nodes            []string  `json:"nodes"`
	Analyzers        []string  `json:"analyzers"`
	ReconstructionID string    `json:"reconstruction_id"`
	ChosenBy         string    `json:"reconstruction_chosen_by"`
	// Tier, when set, limited the export to exposed rows of that tier.
	Tier Tier `json:"tier,omitempty"`
}

// ExportFile is one file of the export with its digest.
type ExportFile struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	Rows   uint64 `json:"rows,omitempty"`
	Tenant string `json:"tenant,omitempty"`
}
