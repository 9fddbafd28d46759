package analyze

import (
	"context"
	"sort"
)

// LatestAffected reads the most recent reconstruction's rows: received
// first, then exposed from the most certain tier down.
func LatestAffected(ctx context.Context, db AffectedReader) (*Reconstruction, error) {
	id, at, err := db.LatestReconstruction(ctx)
	if err != nil {
		return nil, err
	}
	rec := &Reconstruction{ID: id, Created: at}
	if id == "" {
		return rec, nil
	}
	if rec.CaseID, rec.Rows, err = db.AffectedRows(ctx, id); err != nil {
		return nil, err
	}
	sortList(rec.Rows)
	return rec, nil
}

// sortList puts rows in list order: received first, then exposed from the
// most certain tier down, each by tenant.
func sortList(rows []AffectedRow) {
	sort.SliceStable(rows, func(i, j int) bool {
		x, y := rows[i], rows[j]
		if x.Role != y.Role {
			return x.Role.Rank() < y.Role.Rank()
		}
		if x.Tier != y.Tier {
			return x.Tier.Rank() < y.Tier.Rank()
		}
		return x.Tenant < y.Tenant
	})
}
