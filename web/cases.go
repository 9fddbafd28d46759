package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kvtrail/kvtrail/domain"
)

// caseStore is what the case pages need.
type caseStore interface {
	ListCases(ctx context.Context) ([]Case, error)
	GetCase(ctx context.Context, id string) (Case, error)
	SaveCase(ctx context.Context, c Case) error
	HoldEvidence(ctx context.Context, c Case, by string, at time.Time) (uint64, error)
	HeldLines(ctx context.Context, caseID string) (uint64, error)
	HoldInfo(ctx context.Context, caseID string) (HoldInfo, error)
	CaseRuns(ctx context.Context, caseID string) ([]AnalyzerRun, error)
}

// AffectedReader is the read path of notification lists. kvtrail reads the
// affected table directly; analyze/ can supply its own implementation
// through Options.Affected.
type AffectedReader interface {
	// Reconstruction picks the reconstruction a case shows ("" if none);
	// source says how it was chosen ("case" or "window").
	Reconstruction(ctx context.Context, c Case) (id, source string, err error)
	// AffectedPage returns up to limit rows after the key (nil: from the
	// start), in (affected_role, tenant) order.
	AffectedPage(ctx context.Context, reconstructionID string, tenants []string, after *AffectedKey, limit int) ([]AffectedRow, error)
	AffectedCount(ctx context.Context, reconstructionID string, tenants []string) (uint64, error)
}

// CaseAnalyzer runs the analyzers over a case's window and filters and
// records its runs with the case id (analyze/ provides it).
type CaseAnalyzer interface {
	AnalyzeCase(ctx context.Context, c Case, user string) (runIDs []string, err error)
}

// affectedChunk is the keyset page size when reading a whole list.
const affectedChunk = 1000

var idPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,80}$`)

func newID(prefix string) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + hex.EncodeToString(b)
}

// caseInput is the create/edit form (or JSON body).
type caseInput struct {
	Name      string   `json:"name" form:"name"`
	From      string   `json:"window_from" form:"window_from"`
	To        string   `json:"window_to" form:"window_to"`
	Notes     string   `json:"notes" form:"notes"`
	Status    string   `json:"status" form:"status"`
	Tenants   []string `json:"tenants"`
	Nodes     []string `json:"nodes"`
	Analyzers []string `json:"analyzers"`
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func bindCase(c *gin.Context, base Case) (Case, error) {
	var in caseInput
	if strings.HasPrefix(c.ContentType(), "application/json") {
		if err := c.ShouldBindJSON(&in); err != nil {
			return base, invalid("body must be a JSON case")
		}
	} else {
		in = caseInput{Name: c.PostForm("name"), From: c.PostForm("window_from"), To: c.PostForm("window_to"),
			Notes: c.PostForm("notes"), Status: c.PostForm("status"), Tenants: splitList(c.PostForm("tenants")),
			Nodes: splitList(c.PostForm("nodes")), Analyzers: splitList(c.PostForm("analyzers"))}
	}
	out := base
	out.Name = strings.TrimSpace(in.Name)
	if out.Name == "" || len(out.Name) > 200 || !validUTF8Param(out.Name) {
		return base, invalid("name is required (at most 200 characters)")
	}
	var err error
	if out.From, err = parseTime(in.From); err != nil {
		return base, err
	}
	if out.To, err = parseTime(in.To); err != nil {
		return base, err
	}
	if out.From.IsZero() || out.To.IsZero() || !out.From.Before(out.To) {
		return base, invalid("window_from and window_to are required and from must be before to")
	}
	if len(in.Notes) > 100_000 {
		return base, invalid("notes are limited to 100000 bytes")
	}
	out.Notes = strings.ToValidUTF8(in.Notes, "\uFFFD")
	switch in.Status {
	case "":
		if out.Status == "" {
			out.Status = "open"
		}
	case "open", "closed":
		out.Status = in.Status
	default:
		return base, invalid("status must be open or closed")
	}
	for _, l := range [][]string{in.Tenants, in.Nodes, in.Analyzers} {
		if len(l) > 1000 {
			return base, invalid("at most 1000 entries per filter")
		}
		for _, v := range l {
			if !validUTF8Param(v) {
				return base, invalid("a filter value is not valid UTF-8 or is too long")
			}
		}
	}
	out.Filters = CaseFilters{Tenants: in.Tenants, Nodes: in.Nodes, Analyzers: in.Analyzers}
	return out, nil
}

func (s *server) caseParam(c *gin.Context) (Case, bool) {
	id := c.Param("id")
	if !idPattern.MatchString(id) {
		s.fail(c, errNotFound)
		return Case{}, false
	}
	cs, err := s.cases.GetCase(c.Request.Context(), id)
	if err != nil {
		s.fail(c, err)
		return Case{}, false
	}
	return cs, true
}

type casesView struct {
	Cases []Case `json:"cases"`
	// Error and Form re-render a rejected form with its input kept.
	Error string            `json:"-"`
	Form  map[string]string `json:"-"`
}

// formValues keeps what the user typed into the case form.
func formValues(c *gin.Context) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"name", "window_from", "window_to", "tenants", "nodes", "analyzers", "notes"} {
		out[k] = c.PostForm(k)
	}
	return out
}

func (s *server) casesList(c *gin.Context) {
	cs, err := s.cases.ListCases(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	s.respond(c, "cases", "Cases", casesView{Cases: cs})
}

func (s *server) caseCreate(c *gin.Context) {
	now := s.now().UTC()
	p := principal(c)
	cs, err := bindCase(c, Case{ID: newID("case-"), CreatedBy: p.Name, CreatedAt: now})
	if err != nil && !isAPI(c) && domain.KindOf(err) == domain.Invalid {
		// The form comes back with the message and the input kept.
		list, lerr := s.cases.ListCases(c.Request.Context())
		if lerr != nil {
			s.fail(c, lerr)
			return
		}
		s.renderTitled(c, http.StatusBadRequest, "cases", "Cases", casesView{Cases: list, Error: domain.Message(err), Form: formValues(c)}, 0)
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	cs.UpdatedAt, cs.Version = now, uint64(now.UnixNano())
	if err := s.cases.SaveCase(c.Request.Context(), cs); err != nil {
		s.fail(c, err)
		return
	}
	if !s.audit(c, p, "case_create", map[string]any{"case_id": cs.ID, "name": cs.Name, "from": cs.From, "to": cs.To, "filters": cs.Filters}, 1, http.StatusCreated) {
		return
	}
	if isAPI(c) {
		c.JSON(http.StatusCreated, cs)
		return
	}
	c.Redirect(http.StatusSeeOther, "/cases/"+cs.ID)
}

func (s *server) caseUpdate(c *gin.Context) {
	old, ok := s.caseParam(c)
	if !ok {
		return
	}
	cs, err := bindCase(c, old)
	if err != nil && !isAPI(c) && domain.KindOf(err) == domain.Invalid {
		// The case page comes back with the message and the edit kept.
		v, verr := s.casePage(c, old, "")
		if verr != nil {
			s.fail(c, verr)
			return
		}
		v.FormError, v.Form = domain.Message(err), formValues(c)
		v.Form["status"] = c.PostForm("status")
		s.renderTitled(c, http.StatusBadRequest, "case", "Case "+shown(old.Name, 80), v, 0)
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	now := s.now().UTC()
	cs.UpdatedAt, cs.Version = now, max(uint64(now.UnixNano()), old.Version+1)
	if err := s.cases.SaveCase(c.Request.Context(), cs); err != nil {
		s.fail(c, err)
		return
	}
	if !s.audit(c, principal(c), "case_update", map[string]any{"case_id": cs.ID, "name": cs.Name, "from": cs.From, "to": cs.To, "filters": cs.Filters, "status": cs.Status}, 1, http.StatusOK) {
		return
	}
	if isAPI(c) {
		c.JSON(http.StatusOK, cs)
		return
	}
	c.Redirect(http.StatusSeeOther, "/cases/"+cs.ID)
}

// AffectedList is a case's notification list as the case page shows it.
type AffectedList struct {
	ReconstructionID string `json:"reconstruction_id"`
	ChosenBy         string `json:"chosen_by"`
	// Total counts the whole list; Shown the rows after the tier filter.
	Total    uint64 `json:"total"`
	Shown    int    `json:"shown"`
	Received int    `json:"received"`
	Exposed  int    `json:"exposed"`
	// ByTier counts the exposed rows of each tier in the whole list, so
	// the filter can say what each choice holds.
	ByTier map[domain.Tier]int `json:"exposed_by_tier"`
	// Tier is the filter applied ("" for all): only exposed rows of that
	// tier are listed, as `kvtrail affected --tier` does.
	Tier domain.Tier   `json:"tier,omitempty"`
	Rows []AffectedRow `json:"rows"`
	// all is the whole list, before the tier filter.
	all []AffectedRow
}

// tierParam reads ?tier= (confirmed, likely or possible; empty means all).
// An unknown tier is a 400 naming the three, never an empty list.
func tierParam(c *gin.Context) (domain.Tier, error) {
	v := c.Query("tier")
	if !validUTF8Param(v) {
		return "", invalid("bad tier")
	}
	if strings.EqualFold(strings.TrimSpace(v), "all") {
		return "", nil
	}
	return domain.ParseTier(v)
}

// keepTier narrows rows to the exposed rows of tier ("" keeps all).
func keepTier(rows []AffectedRow, tier domain.Tier) []AffectedRow {
	if tier == "" {
		return rows
	}
	out := rows[:0:0]
	for _, r := range rows {
		if r.Role == domain.Exposed && r.Tier == tier {
			out = append(out, r)
		}
	}
	return out
}

// affectedList reads the whole list with keyset pages (no row cap) and
// keeps the rows of tier ("" for all).
func (s *server) affectedList(ctx context.Context, cs Case, tier domain.Tier) (AffectedList, error) {
	l := AffectedList{Tier: tier, ByTier: map[domain.Tier]int{}}
	var err error
	if l.ReconstructionID, l.ChosenBy, err = s.affected.Reconstruction(ctx, cs); err != nil || l.ReconstructionID == "" {
		return l, err
	}
	if l.Total, err = s.affected.AffectedCount(ctx, l.ReconstructionID, cs.Filters.Tenants); err != nil {
		return l, err
	}
	var after *AffectedKey
	for {
		rows, err := s.affected.AffectedPage(ctx, l.ReconstructionID, cs.Filters.Tenants, after, affectedChunk)
		if err != nil {
			return l, err
		}
		l.Rows = append(l.Rows, rows...)
		if len(rows) < affectedChunk {
			break
		}
		last := rows[len(rows)-1]
		after = &AffectedKey{Role: last.StoredRole, Tenant: last.Tenant}
	}
	normalizeRoles(l.Rows)
	// Received rows first (who got someone else's data), then exposed rows
	// by tier, most certain first.
	sort.SliceStable(l.Rows, func(i, j int) bool {
		a, b := l.Rows[i], l.Rows[j]
		if a.Role.Rank() != b.Role.Rank() {
			return a.Role.Rank() < b.Role.Rank()
		}
		if a.Tier.Rank() != b.Tier.Rank() {
			return a.Tier.Rank() < b.Tier.Rank()
		}
		return a.Tenant < b.Tenant
	})
	for _, r := range l.Rows {
		if r.Role == domain.Received {
			l.Received++
		} else {
			l.Exposed++
			l.ByTier[r.Tier]++
		}
	}
	l.all = l.Rows
	l.Rows = keepTier(l.Rows, tier)
	l.Shown = len(l.Rows)
	return l, nil
}

type caseView struct {
	Case     Case          `json:"case"`
	Affected AffectedList  `json:"affected"`
	Held     uint64        `json:"held_lines"`
	Hold     HoldInfo      `json:"hold"`
	Runs     []AnalyzerRun `json:"analyzer_runs"`
	Exports  []Export      `json:"exports,omitempty"`
	CanRun   bool          `json:"can_run_analyzers"`
	Tiers    []domain.Tier `json:"-"`
	// Quiet are victims the list names on no received row (own data only,
	// or only possible foreign writers); QuietCapped: more exist.
	Quiet       []QuietVictim `json:"affected_without_foreign_data"`
	QuietCapped bool          `json:"affected_without_foreign_data_capped,omitempty"`
	// FormError and Form re-render a rejected edit with its input kept.
	FormError string                                     `json:"-"`
	Form      map[string]string                          `json:"-"`
	Charts    []*Chart                                   `json:"-"`
	Message   string                                     `json:"-"`
	FilterStr struct{ Tenants, Nodes, Analyzers string } `json:"-"`
}

func (s *server) caseView(c *gin.Context) {
	cs, ok := s.caseParam(c)
	if !ok {
		return
	}
	tier, err := tierParam(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	v, err := s.casePage(c, cs, tier)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !s.audit(c, principal(c), "case_view", map[string]any{"case_id": cs.ID, "reconstruction_id": v.Affected.ReconstructionID, "tier": tier}, int64(len(v.Affected.Rows)), http.StatusOK) {
		return
	}
	s.respond(c, "case", "Case "+shown(cs.Name, 80), v)
}

// casePage gathers what the case page shows.
func (s *server) casePage(c *gin.Context, cs Case, tier domain.Tier) (caseView, error) {
	ctx := c.Request.Context()
	v := caseView{Case: cs, CanRun: s.analyzer != nil, Message: c.Query("msg"), Tiers: domain.Tiers}
	var err error
	if v.Affected, err = s.affectedList(ctx, cs, tier); err != nil {
		return v, err
	}
	if v.Affected.ReconstructionID != "" {
		if v.Quiet, v.QuietCapped, err = s.quietVictims(ctx, cs, v.Affected.all); err != nil {
			return v, err
		}
	}
	if v.Held, err = s.cases.HeldLines(ctx, cs.ID); err != nil {
		return v, err
	}
	if v.Hold, err = s.cases.HoldInfo(ctx, cs.ID); err != nil {
		return v, err
	}
	if v.Runs, err = s.cases.CaseRuns(ctx, cs.ID); err != nil {
		return v, err
	}
	if s.charts != nil && !isAPI(c) {
		if v.Charts, err = caseCharts(ctx, s.charts, cs); err != nil {
			return v, err
		}
	}
	if principal(c).Can(permExport) {
		if v.Exports, err = s.exports.store.ListExports(ctx, cs.ID); err != nil {
			return v, err
		}
		for i := range v.Exports {
			v.Exports[i] = s.exports.withProgress(v.Exports[i])
		}
	}
	v.FilterStr.Tenants = strings.Join(cs.Filters.Tenants, ", ")
	v.FilterStr.Nodes = strings.Join(cs.Filters.Nodes, ", ")
	v.FilterStr.Analyzers = strings.Join(cs.Filters.Analyzers, ", ")
	return v, nil
}

func (s *server) caseAffected(c *gin.Context) {
	cs, ok := s.caseParam(c)
	if !ok {
		return
	}
	tier, err := tierParam(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	l, err := s.affectedList(c.Request.Context(), cs, tier)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !s.audit(c, principal(c), "affected_view", map[string]any{"case_id": cs.ID, "reconstruction_id": l.ReconstructionID, "tier": tier}, int64(len(l.Rows)), http.StatusOK) {
		return
	}
	c.JSON(http.StatusOK, l)
}

func (s *server) caseHold(c *gin.Context) {
	cs, ok := s.caseParam(c)
	if !ok {
		return
	}
	p := principal(c)
	now := s.now().UTC()
	n, err := s.cases.HoldEvidence(c.Request.Context(), cs, p.Name, now)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !cs.LegalHold {
		cs.LegalHold, cs.UpdatedAt, cs.Version = true, now, max(uint64(now.UnixNano()), cs.Version+1)
		if err := s.cases.SaveCase(c.Request.Context(), cs); err != nil {
			s.fail(c, err)
			return
		}
	}
	if !s.audit(c, p, "legal_hold", map[string]any{"case_id": cs.ID, "from": cs.From, "to": cs.To, "nodes": cs.Filters.Nodes}, int64(n), http.StatusOK) {
		return
	}
	if isAPI(c) {
		c.JSON(http.StatusOK, gin.H{"case_id": cs.ID, "held_lines": n})
		return
	}
	c.Redirect(http.StatusSeeOther, "/cases/"+cs.ID+"?msg=held")
}

// caseRelease lifts a case's legal hold (admins only): retention may drop
// the case's partitions again. The copies already in case_evidence stay.
func (s *server) caseRelease(c *gin.Context) {
	cs, ok := s.caseParam(c)
	if !ok {
		return
	}
	p := principal(c)
	now := s.now().UTC()
	if !cs.LegalHold {
		s.fail(c, domain.Errorf(domain.Conflict, "case %s is not under legal hold", cs.ID))
		return
	}
	cs.LegalHold, cs.UpdatedAt, cs.Version = false, now, max(uint64(now.UnixNano()), cs.Version+1)
	if err := s.cases.SaveCase(c.Request.Context(), cs); err != nil {
		s.fail(c, err)
		return
	}
	if !s.audit(c, p, "legal_hold_release", map[string]any{"case_id": cs.ID}, 1, http.StatusOK) {
		return
	}
	if isAPI(c) {
		c.JSON(http.StatusOK, gin.H{"case_id": cs.ID, "legal_hold": false})
		return
	}
	c.Redirect(http.StatusSeeOther, "/cases/"+cs.ID+"?msg=released")
}

func (s *server) caseAnalyze(c *gin.Context) {
	cs, ok := s.caseParam(c)
	if !ok {
		return
	}
	if s.analyzer == nil {
		s.renderError(c, http.StatusNotImplemented, "The analyzers are not available in this build.")
		return
	}
	runs, err := s.analyzer.AnalyzeCase(c.Request.Context(), cs, principal(c).Name)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !s.audit(c, principal(c), "analyze", map[string]any{"case_id": cs.ID, "runs": runs}, int64(len(runs)), http.StatusOK) {
		return
	}
	if isAPI(c) {
		c.JSON(http.StatusOK, gin.H{"case_id": cs.ID, "run_ids": runs})
		return
	}
	c.Redirect(http.StatusSeeOther, "/cases/"+cs.ID+"?msg=analyzed")
}

func (s *server) caseTenant(c *gin.Context) {
	cs, ok := s.caseParam(c)
	if !ok {
		return
	}
	tenant := c.Param("tenant")
	if !validUTF8Param(tenant) {
		s.fail(c, invalid("bad tenant"))
		return
	}
	q := SearchQuery{Tenant: tenant, From: cs.From, To: cs.To, Sort: c.DefaultQuery("sort", "ts_asc"), Cursor: c.Query("cursor"), Limit: pageLimit(c, 100)}
	if _, ok := searchSorts[q.Sort]; !ok {
		s.fail(c, invalid("bad sort"))
		return
	}
	page, err := s.searches.SearchRequests(c.Request.Context(), q)
	if err != nil {
		s.fail(c, err)
		return
	}
	v := searchView{SearchPage: page, Searched: true, CaseID: cs.ID, Tenant: tenant}
	l, err := s.affectedList(c.Request.Context(), cs, "")
	if err != nil {
		s.fail(c, err)
		return
	}
	keys := map[string]bool{}
	for _, r := range l.Rows { // received rows come first (affectedList)
		if r.Tenant != tenant {
			continue
		}
		v.Affected = append(v.Affected, r)
		for _, k := range r.RequestKeys {
			if !keys[k] && len(v.AffectedRequests) < maxAffectedRequests {
				v.AffectedRequests = append(v.AffectedRequests, affectedRequest{RequestID: k, Role: r.Role, Tier: r.Tier, Counterparts: r.Counterparts})
			}
			keys[k] = true
		}
	}
	for i := range v.Rows {
		v.Rows[i].Affected = keys[v.Rows[i].RequestID]
	}
	if !s.audit(c, principal(c), "tenant_view", map[string]any{"case_id": cs.ID, "tenant": tenant, "cursor": q.Cursor}, int64(page.Total), http.StatusOK) {
		return
	}
	v.Links = pager(c, c.Request.URL.Path, page.Next)
	s.respond(c, "search", "Tenant "+shown(tenant, 80), v)
}
