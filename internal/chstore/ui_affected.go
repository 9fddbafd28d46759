package chstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/kvtrail/kvtrail/domain"
)

// uiAffectedExtras records which optional columns the affected table has:
// tier and counterparts are added by a later schema version, and the UI
// reads them where they exist rather than requiring them.
type uiAffectedExtras struct {
	once               sync.Once
	tier, counterparts bool
	err                error
}

var uiExtrasByConn sync.Map // *Store -> *uiAffectedExtras

func (s UIStore) extras(ctx context.Context) (*uiAffectedExtras, error) {
	v, _ := uiExtrasByConn.LoadOrStore(s.Store, &uiAffectedExtras{})
	x := v.(*uiAffectedExtras)
	x.once.Do(func() {
		var cols []struct {
			Name string `ch:"name"`
		}
		x.err = s.Store.Select(ctx, &cols, "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = 'affected'")
		for _, c := range cols {
			x.tier = x.tier || c.Name == "tier"
			x.counterparts = x.counterparts || c.Name == "counterparts"
		}
	})
	if x.err != nil {
		err := x.err
		uiExtrasByConn.Delete(s.Store) // try again next time
		return nil, fmt.Errorf("affected columns: %w", err)
	}
	return x, nil
}

// addTiers fills Tier and Counterparts on rows of one reconstruction, when
// the table has those columns.
func (s UIStore) addTiers(ctx context.Context, reconstructionID string, rows []domain.AffectedListRow) error {
	domain.NormalizeRoles(rows)
	x, err := s.extras(ctx)
	if err != nil || len(rows) == 0 || (!x.tier && !x.counterparts) {
		return err
	}
	tier, cp := "''", "emptyArrayString()"
	if x.tier {
		tier = "toString(tier)"
	}
	if x.counterparts {
		cp = "counterparts"
	}
	tenants := make([]string, len(rows))
	for i, r := range rows {
		tenants[i] = r.Tenant
	}
	var got []struct {
		Tenant string   `ch:"tenant"`
		Role   string   `ch:"affected_role"`
		Tier   string   `ch:"t"`
		CP     []string `ch:"cp"`
	}
	err = s.Store.Select(ctx, &got, "SELECT tenant, affected_role, "+tier+" AS t, "+cp+` AS cp FROM affected
WHERE reconstruction_id = ? AND has(?, tenant)`, reconstructionID, tenants)
	if err != nil {
		return fmt.Errorf("affected tiers: %w", err)
	}
	type key struct{ t, r string }
	by := map[key]int{}
	for i, g := range got {
		by[key{g.Tenant, g.Role}] = i
	}
	for i := range rows {
		if j, ok := by[key{rows[i].Tenant, rows[i].StoredRole}]; ok {
			rows[i].Tier, _ = domain.ParseTier(got[j].Tier)
			rows[i].Counterparts = got[j].CP
		}
	}
	return nil
}

// latestReconstruction is the newest reconstruction (analyze.LatestAffected's
// rule: latest created_at, then the greater id).
func (s UIStore) latestReconstruction(ctx context.Context) (string, error) {
	var rows []struct {
		ID string `ch:"rid"`
	}
	err := s.Store.Select(ctx, &rows, `SELECT reconstruction_id AS rid FROM affected
GROUP BY reconstruction_id ORDER BY max(created_at) DESC, rid DESC LIMIT 1`)
	if err != nil {
		return "", fmt.Errorf("latest reconstruction: %w", err)
	}
	if len(rows) == 0 {
		return "", nil
	}
	return rows[0].ID, nil
}

// sourcesFor reads, from the latest reconstruction, the other side of a
// request (requestKey, with its tenant) or of findings: the rows that share
// a finding with it, other than the request's own tenant. A row's
// counterparts (when the table has them) are used as they are. The rows
// are found through affected_keys (a key read), not by searching every
// row's request and finding arrays.
func (s UIStore) sourcesFor(ctx context.Context, requestKey, tenant string, findingIDs []string) ([]domain.SourceTenant, bool, error) {
	rid, err := s.latestReconstruction(ctx)
	if err != nil || rid == "" {
		return nil, false, err
	}
	keys := []any{"r:" + requestKey}
	for _, id := range findingIDs {
		keys = append(keys, "f:"+id)
	}
	var hits []struct {
		Role      string `ch:"affected_role"`
		Tenant    string `ch:"tenant"`
		ByRequest uint8  `ch:"by_request"`
	}
	err = s.Store.Select(ctx, &hits, `SELECT affected_role, tenant, max(key = ?) AS by_request FROM affected_keys
WHERE reconstruction_id = ? AND key IN (`+uiPlaceholders(len(keys))+`)
GROUP BY affected_role, tenant ORDER BY affected_role, tenant LIMIT 1000`, append([]any{"r:" + requestKey, rid}, keys...)...)
	if err != nil {
		return nil, false, fmt.Errorf("sources: %w", err)
	}
	rows := make([]domain.AffectedListRow, len(hits))
	mineByRequest := map[string]bool{}
	for i, h := range hits {
		rows[i] = domain.AffectedListRow{ReconstructionID: rid, StoredRole: h.Role, Tenant: h.Tenant}
		if h.ByRequest == 1 {
			mineByRequest[h.Role+"|"+h.Tenant] = true
		}
	}
	if err := s.addTiers(ctx, rid, rows); err != nil {
		return nil, false, err
	}
	var out []domain.SourceTenant
	own := false
	seen := map[string]bool{}
	add := func(src domain.SourceTenant) {
		k := src.Tenant + "|" + string(src.Role)
		if !seen[k] {
			seen[k] = true
			out = append(out, src)
		}
	}
	for _, r := range rows {
		mine := r.Tenant == tenant && mineByRequest[r.StoredRole+"|"+r.Tenant]
		switch {
		case mine && len(r.Counterparts) > 0:
			other := domain.Exposed
			if r.Role == domain.Exposed {
				other = domain.Received
			}
			for _, c := range r.Counterparts {
				if c == tenant {
					own = true
					continue
				}
				add(domain.SourceTenant{Tenant: c, Role: other})
			}
		case mine:
		case r.Tenant == tenant:
			// The tenant's own pages on the other side: its own data only.
			own = true
		default:
			add(domain.SourceTenant{Tenant: r.Tenant, Role: r.Role, Tier: r.Tier})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Role.Rank() != out[j].Role.Rank() {
			return out[i].Role.Rank() < out[j].Role.Rank()
		}
		return out[i].Tier.Rank() < out[j].Tier.Rank()
	})
	return out, own && len(out) == 0, nil
}

func uiContains(v []string, x string) bool {
	for _, s := range v {
		if s == x {
			return true
		}
	}
	return false
}

// fillForeignFromReconstruction sets foreign_tenants on findings the
// analyzer left empty: the tenants of the latest reconstruction's rows that
// cite the finding, other than its own tenant. One key read of
// affected_keys for a whole page.
func (s UIStore) fillForeignFromReconstruction(ctx context.Context, fs []domain.FindingView) error {
	var ids []string
	for _, f := range fs {
		if len(f.ForeignTenants) == 0 {
			ids = append(ids, f.FindingID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rid, err := s.latestReconstruction(ctx)
	if err != nil || rid == "" {
		return err
	}
	keys := make([]any, 0, len(ids)+1)
	keys = append(keys, rid)
	for _, id := range ids {
		keys = append(keys, "f:"+id)
	}
	var rows []struct {
		Key    string `ch:"key"`
		Tenant string `ch:"tenant"`
	}
	err = s.Store.Select(ctx, &rows, `SELECT DISTINCT key, tenant FROM affected_keys
WHERE reconstruction_id = ? AND key IN (`+uiPlaceholders(len(ids))+`) ORDER BY key, tenant LIMIT 100000`, keys...)
	if err != nil {
		return fmt.Errorf("foreign tenants: %w", err)
	}
	by := map[string][]string{}
	for _, r := range rows {
		id := strings.TrimPrefix(r.Key, "f:")
		by[id] = append(by[id], r.Tenant)
	}
	for i := range fs {
		if len(fs[i].ForeignTenants) > 0 {
			continue
		}
		for _, t := range by[fs[i].FindingID] {
			if t != fs[i].Tenant && !uiContains(fs[i].ForeignTenants, t) {
				fs[i].ForeignTenants = append(fs[i].ForeignTenants, t)
			}
		}
	}
	return nil
}
