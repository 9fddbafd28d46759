package chstore

import (
	"github.com/kvtrail/kvtrail/domain"

	"context"
	"encoding/json"
	"fmt"
	"time"
)

type uiExportRow struct {
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

// uiExportManifestRecord is what the exports.manifest column holds: the
// manifest and the digest of the manifest file.
type uiExportManifestRecord struct {
	Manifest *domain.ExportManifest `json:"manifest"`
	SHA256   string                 `json:"manifest_sha256"`
}

func (r uiExportRow) toExport() domain.Export {
	e := domain.Export{ID: r.ID, CaseID: r.CaseID, RequestedBy: r.RequestedBy, CreatedAt: r.CreatedAt, Status: r.Status,
		Rows: r.Rows, Error: r.Error, Version: r.Version}
	if r.Manifest != "" {
		var m uiExportManifestRecord
		if json.Unmarshal([]byte(r.Manifest), &m) == nil {
			e.Manifest, e.ManifestSHA256 = m.Manifest, m.SHA256
		}
	}
	return e
}

const uiExportCols = `export_id, case_id, requested_by, created_at, status, rows, manifest, error, version`

// SaveExport writes a new version of the export row.
func (s UIStore) SaveExport(ctx context.Context, e domain.Export) error {
	m := ""
	if e.Manifest != nil {
		b, _ := json.Marshal(uiExportManifestRecord{Manifest: e.Manifest, SHA256: e.ManifestSHA256})
		m = string(b)
	}
	err := s.Store.Exec(ctx, "INSERT INTO exports ("+uiExportCols+") SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?",
		e.ID, e.CaseID, e.RequestedBy, uiUTC(e.CreatedAt), e.Status, e.Rows, m, e.Error, e.Version)
	if err != nil {
		return fmt.Errorf("save export: %w", err)
	}
	return nil
}

func (s UIStore) GetExport(ctx context.Context, id string) (domain.Export, error) {
	var rows []uiExportRow
	if err := s.Store.Select(ctx, &rows, "SELECT "+uiExportCols+" FROM exports FINAL WHERE export_id = ? LIMIT 1", id); err != nil {
		return domain.Export{}, fmt.Errorf("get export: %w", err)
	}
	if len(rows) == 0 {
		return domain.Export{}, uiNotFound
	}
	return rows[0].toExport(), nil
}

func (s UIStore) ListExports(ctx context.Context, caseID string) ([]domain.Export, error) {
	var rows []uiExportRow
	if err := s.Store.Select(ctx, &rows, "SELECT "+uiExportCols+" FROM exports FINAL WHERE case_id = ? ORDER BY created_at DESC, export_id LIMIT 1000", caseID); err != nil {
		return nil, fmt.Errorf("list exports: %w", err)
	}
	out := make([]domain.Export, len(rows))
	for i, r := range rows {
		out[i] = r.toExport()
	}
	return out, nil
}
