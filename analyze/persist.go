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
	sort.SliceStable(rec.Rows, func(i, j int) bool {
		x, y := rec.Rows[i], rec.Rows[j]
		if x.Role != y.Role {
			return x.Role.Rank() < y.Role.Rank()
		}
		if x.Tier != y.Tier {
			return x.Tier.Rank() < y.Tier.Rank()
		}
		return x.Tenant < y.Tenant
	})
	return rec, nil
}
