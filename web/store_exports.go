package web

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// Export is a notification-list export job and, when done, its manifest.
type Export struct {
	ID          string    `json:"export_id"`
	CaseID      string    `json:"case_id"`
	RequestedBy string    `json:"requested_by"`
	CreatedAt   time.Time `json:"created_at"`
	Status      string    `json:"status"` // running, done, failed; interrupted is derived on read (withProgress)
	Rows        uint64    `json:"rows"`
	Manifest    *Manifest `json:"manifest,omitempty"`
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
type Manifest struct {
	ExportID         string              `json:"export_id"`
	CaseID           string              `json:"case_id"`
	CaseName         string              `json:"case_name"`
	Filter           ManifestFilter      `json:"filter"`
	AnalyzerVersions map[string][]string `json:"analyzer_versions"`
	RowCount         uint64              `json:"row_count"`
	Received         int                 `json:"received"`
	Exposed          int                 `json:"exposed"`
	// ExposedByTier counts the exported exposed rows of each tier.
	ExposedByTier  map[domain.Tier]int `json:"exposed_by_tier"`
	Tenants        int                 `json:"tenants"`
	Files          []ManifestFile      `json:"files"`
	User           string              `json:"user"`
	Role           string              `json:"role"`
	StartedAt      time.Time           `json:"started_at"`
	FinishedAt     time.Time           `json:"finished_at"`
	KvtrailVersion string              `json:"kvtrail_version"`
}

// ManifestFilter is what selected the rows.
type ManifestFilter struct {
	WindowFrom       time.Time `json:"window_from"`
	WindowTo         time.Time `json:"window_to"`
	Tenants          []string  `json:"tenants"`
	Nodes            []string  `json:"nodes"`
	Analyzers        []string  `json:"analyzers"`
	ReconstructionID string    `json:"reconstruction_id"`
	ChosenBy         string    `json:"reconstruction_chosen_by"`
	// Tier, when set, limited the export to exposed rows of that tier.
	Tier domain.Tier `json:"tier,omitempty"`
}

// ManifestFile is one file of the export with its digest.
type ManifestFile struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	Rows   uint64 `json:"rows,omitempty"`
	Tenant string `json:"tenant,omitempty"`
}

type exportRow struct {
	ID          string    `ch:"export_id"`
	CaseID      string    `ch:"case_id"`
	RequestedBy string    `ch:"requested_by"`
	CreatedAt   time.Time `ch:"created_at"`
	Status      string    `ch:"status"`
	Rows        uint64    `ch:"rows"`
	Manifest    string    `ch:"manifest"`
	Error       string    `ch:"error"`
	Version     uint64    `ch:"version"`
}

// exportManifestRecord is what the exports.manifest column holds: the
// manifest and the digest of the manifest file.
type exportManifestRecord struct {
	Manifest *Manifest `json:"manifest"`
	SHA256   string    `json:"manifest_sha256"`
}

func (r exportRow) toExport() Export {
	e := Export{ID: r.ID, CaseID: r.CaseID, RequestedBy: r.RequestedBy, CreatedAt: r.CreatedAt, Status: r.Status,
		Rows: r.Rows, Error: r.Error, Version: r.Version}
	if r.Manifest != "" {
		var m exportManifestRecord
		if json.Unmarshal([]byte(r.Manifest), &m) == nil {
			e.Manifest, e.ManifestSHA256 = m.Manifest, m.SHA256
		}
	}
	return e
}

const exportCols = `export_id, case_id, requested_by, created_at, status, rows, manifest, error, version`

// SaveExport writes a new version of the export row.
func (s chStore) SaveExport(ctx context.Context, e Export) error {
	m := ""
	if e.Manifest != nil {
		b, _ := json.Marshal(exportManifestRecord{Manifest: e.Manifest, SHA256: e.ManifestSHA256})
		m = string(b)
	}
	err := s.c.Exec(ctx, "INSERT INTO exports ("+exportCols+") SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?",
		e.ID, e.CaseID, e.RequestedBy, utc(e.CreatedAt), e.Status, e.Rows, m, e.Error, e.Version)
	if err != nil {
		return fmt.Errorf("save export: %w", err)
	}
	return nil
}

func (s chStore) GetExport(ctx context.Context, id string) (Export, error) {
	var rows []exportRow
	if err := s.c.Select(ctx, &rows, "SELECT "+exportCols+" FROM exports FINAL WHERE export_id = ? LIMIT 1", id); err != nil {
		return Export{}, fmt.Errorf("get export: %w", err)
	}
	if len(rows) == 0 {
		return Export{}, errNotFound
	}
	return rows[0].toExport(), nil
}

func (s chStore) ListExports(ctx context.Context, caseID string) ([]Export, error) {
	var rows []exportRow
	if err := s.c.Select(ctx, &rows, "SELECT "+exportCols+" FROM exports FINAL WHERE case_id = ? ORDER BY created_at DESC, export_id LIMIT 1000", caseID); err != nil {
		return nil, fmt.Errorf("list exports: %w", err)
	}
	out := make([]Export, len(rows))
	for i, r := range rows {
		out[i] = r.toExport()
	}
	return out, nil
}
