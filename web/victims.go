package web

import (
	"context"
	"slices"
	"sort"

	"github.com/kvtrail/kvtrail/analyze"
	"github.com/kvtrail/kvtrail/domain"
)

// Bounds of the victims read for a case page: findings are read in keyset
// pages of victimChunk, at most maxVictimFindings of them, and at most
// maxVictimsShown requests are listed.
const (
	victimChunk       = 500
	maxVictimFindings = 20_000
	maxVictimsShown   = 500
)

// QuietVictim is a request a victim-marking finding names (a response
// built from KV that was not the request's own) that the notification
// list does not name as having received foreign data: the reconstruction
// found only its own tenant's data in the pages it read (OwnDataOnly), or
// other tenants only as possible writers. It is affected all the same, and
// the case page says so instead of leaving it out.
type QuietVictim struct {
	RequestID   string   `json:"request_id"`
	Tenant      string   `json:"tenant"`
	FindingID   string   `json:"finding_id"`
	Analyzer    string   `json:"analyzer"`
	Severity    string   `json:"severity"`
	OwnDataOnly bool     `json:"own_data_only"`
	Possible    []string `json:"possible_writers,omitempty"`
}

// quietVictims reads the current victim-marking findings in the case's
// window (the analyzers' own rule, analyze.VictimSeverity, and the case's
// tenant and analyzer filters) and keeps those whose request no received
// row of the list names. rows is the whole list, before any tier filter.
func (s *server) quietVictims(ctx context.Context, cs Case, rows []AffectedRow) (out []QuietVictim, capped bool, err error) {
	received := map[string]bool{}
	// exposedBy: per victim finding, the other tenants the reconstruction
	// lists as writers of its pages (exposed rows cite the victim's findings).
	exposedBy := map[string][]string{}
	for _, r := range rows {
		switch r.Role {
		case domain.Received:
			for _, k := range r.RequestKeys {
				received[k] = true
			}
		case domain.Exposed:
			for _, f := range r.FindingIDs {
				exposedBy[f] = append(exposedBy[f], r.Tenant)
			}
		}
	}
	tenants := setOf(cs.Filters.Tenants)
	analyzers := setOf(cs.Filters.Analyzers)
	seen := map[string]bool{}
	read := 0
	// Victims are marked at HIGH, and by some analyzers at MEDIUM.
	for _, sev := range []domain.Severity{domain.High, domain.Medium} {
		q := FindingQuery{Severity: string(sev), From: cs.From, To: cs.To, Limit: victimChunk}
		for {
			page, err := s.findings.ListFindings(ctx, q)
			if err != nil {
				return nil, false, err
			}
			for i := range page.Findings {
				f := &page.Findings[i]
				min, ok := analyze.VictimSeverity(f.Analyzer)
				key := f.RequestKey
				if key == "" {
					key = f.GatewayRequestID
				}
				if !ok || !domain.Severity(f.Severity).AtLeast(min) || key == "" || received[key] || seen[key] ||
					(len(tenants) > 0 && !tenants[f.Tenant]) || (len(analyzers) > 0 && !analyzers[f.Analyzer]) {
					continue
				}
				seen[key] = true
				v := QuietVictim{RequestID: f.GatewayRequestID, Tenant: f.Tenant, FindingID: f.FindingID, Analyzer: f.Analyzer, Severity: f.Severity}
				if v.RequestID == "" {
					v.RequestID = key
				}
				for _, t := range exposedBy[f.FindingID] {
					if t != f.Tenant && !slices.Contains(v.Possible, t) {
						v.Possible = append(v.Possible, t)
					}
				}
				sort.Strings(v.Possible)
				v.OwnDataOnly = len(v.Possible) == 0
				if len(out) < maxVictimsShown {
					out = append(out, v)
				} else {
					capped = true
				}
			}
			read += len(page.Findings)
			if page.Next == "" {
				break
			}
			if read >= maxVictimFindings {
				capped = true
				break
			}
			q.Cursor = page.Next
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].OwnDataOnly != out[j].OwnDataOnly {
			return out[i].OwnDataOnly
		}
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].RequestID < out[j].RequestID
	})
	return out, capped, nil
}

func setOf(v []string) map[string]bool {
	if len(v) == 0 {
		return nil
	}
	m := make(map[string]bool, len(v))
	for _, s := range v {
		m[s] = true
	}
	return m
}
