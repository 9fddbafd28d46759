package web

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-pdf/fpdf"

	"github.com/kvtrail/kvtrail/domain"
)

// exportStore records export jobs.
type exportStore interface {
	SaveExport(ctx context.Context, e Export) error
	GetExport(ctx context.Context, id string) (Export, error)
	ListExports(ctx context.Context, caseID string) ([]Export, error)
}

// versionLister names the analyzer versions behind a list's findings.
type versionLister interface {
	AnalyzerVersions(ctx context.Context, findingIDs []string) (map[string][]string, error)
}

// Export limits.
const (
	exportChunk      = 500           // rows per keyset page while streaming
	exportTimeout    = 6 * time.Hour // one job's longest run
	maxRunningExport = 2             // concurrent jobs per instance
	maxPDFKeys       = 200           // request keys listed per tenant in a PDF
	// A running job re-saves its row (a newer version) this often; a
	// running row with no newer version for exportStaleAfter belongs to an
	// instance that stopped (restart, crash) and will never finish.
	exportHeartbeat  = 30 * time.Second
	exportStaleAfter = 4 * exportHeartbeat
)

// Export file names.
const (
	fileCSV      = "notification.csv"
	fileJSON     = "notification.json"
	fileManifest = "manifest.json"
)

// exporter runs export jobs in the background.
type exporter struct {
	dir      string
	store    exportStore
	affected AffectedReader
	versions versionLister
	log      *slog.Logger
	version  string
	now      func() time.Time
	sem      chan struct{}

	mu       sync.Mutex
	progress map[string]*[2]uint64 // export id -> done, total
	wg       sync.WaitGroup
}

func (x *exporter) setProgress(id string, done, total uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p := x.progress[id]; p != nil {
		p[0], p[1] = done, total
	}
}

// withProgress adds what only this instance knows to a stored export: the
// progress of a job it runs, and that a job nobody runs any more was
// interrupted (its row has not been re-saved within exportStaleAfter).
// Deriving "interrupted" on read, rather than rewriting rows at startup,
// stays right when several instances share the database.
func (x *exporter) withProgress(e Export) Export {
	x.mu.Lock()
	defer x.mu.Unlock()
	p := x.progress[e.ID]
	switch {
	case p != nil:
		e.Done, e.Total = p[0], p[1]
	case e.Status == "done":
		e.Done, e.Total = e.Rows, e.Rows
	case e.Status == "running":
		last := time.Unix(0, int64(e.Version)).UTC()
		if x.now().Sub(last) > exportStaleAfter {
			e.Status = "interrupted"
			e.Error = "the kvtrail instance running this export stopped before it finished (last heard of " +
				last.Format(time.RFC3339) + "); start a new export"
		}
	}
	return e
}

// heartbeat re-saves the running job's row every exportHeartbeat until
// ctx ends, and returns the last version it saved.
func (x *exporter) heartbeat(ctx context.Context, e Export) uint64 {
	t := time.NewTicker(exportHeartbeat)
	defer t.Stop()
	last := e.Version
	for {
		select {
		case <-ctx.Done():
			return last
		case <-t.C:
			hb := e
			hb.Version = max(uint64(x.now().UnixNano()), last+1)
			if err := x.store.SaveExport(ctx, hb); err != nil {
				if ctx.Err() == nil {
					x.log.Warn("export heartbeat failed", slog.String("export_id", e.ID), slog.Any("err", err))
				}
				continue
			}
			last = hb.Version
		}
	}
}

// start records the job (the exposed rows of tier only, when set) and runs it in the background.
func (x *exporter) start(ctx context.Context, cs Case, p *Principal, tier domain.Tier) (Export, error) {
	now := x.now().UTC()
	e := Export{ID: newID("exp-"), CaseID: cs.ID, RequestedBy: p.Name, CreatedAt: now, Status: "running", Version: uint64(now.UnixNano())}
	if err := x.store.SaveExport(ctx, e); err != nil {
		return e, err
	}
	x.mu.Lock()
	x.progress[e.ID] = &[2]uint64{}
	x.mu.Unlock()
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		x.sem <- struct{}{}
		defer func() { <-x.sem }()
		jctx, cancel := context.WithTimeout(context.Background(), exportTimeout)
		defer cancel()
		hctx, stopHeartbeat := context.WithCancel(jctx)
		lastVersion := make(chan uint64, 1)
		go func() { lastVersion <- x.heartbeat(hctx, e) }()
		m, sum, err := x.run(jctx, e, cs, p, tier)
		stopHeartbeat()
		final := e
		// After the last heartbeat, so the final row is the newest version.
		final.Version = max(uint64(x.now().UnixNano()), <-lastVersion+1)
		if err != nil {
			x.log.Error("export failed", slog.String("export_id", e.ID), slog.Any("err", err))
			final.Status, final.Error = "failed", "export failed; see the server log for export "+e.ID
		} else {
			final.Status, final.Rows, final.Manifest, final.ManifestSHA256 = "done", m.RowCount, m, sum
		}
		if err := x.store.SaveExport(jctx, final); err != nil {
			x.log.Error("export record failed", slog.String("export_id", e.ID), slog.Any("err", err))
		}
		x.mu.Lock()
		delete(x.progress, e.ID)
		x.mu.Unlock()
	}()
	return e, nil
}

// hashedFile is a file being written with its SHA-256 computed on the way.
type hashedFile struct {
	f    *os.File
	h    hash.Hash
	w    io.Writer
	name string
	n    int64
}

func createHashed(dir, name string) (*hashedFile, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	return &hashedFile{f: f, h: h, w: io.MultiWriter(f, h), name: name}, nil
}

func (h *hashedFile) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	h.n += int64(n)
	return n, err
}

func (h *hashedFile) close() (ManifestFile, error) {
	if err := h.f.Sync(); err != nil {
		h.f.Close()
		return ManifestFile{}, err
	}
	if err := h.f.Close(); err != nil {
		return ManifestFile{}, err
	}
	return ManifestFile{Name: h.name, Bytes: h.n, SHA256: hex.EncodeToString(h.h.Sum(nil))}, nil
}

// csvSafe keeps a spreadsheet from reading a cell as a formula: tenant
// names and keys come from logs and are hostile.
func csvSafe(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// csvHeader: tier and counterparts come last so that readers of the
// earlier column order keep working.
var csvHeader = []string{"tenant", "affected_role", "requests", "first_ts", "last_ts", "confidence", "models", "nodes",
	"request_keys", "finding_ids", "reconstruction_id", "case_id", "tier", "counterparts"}

func csvRecord(r AffectedRow) []string {
	rec := []string{r.Tenant, string(r.Role), fmt.Sprint(r.Requests), r.FirstTS.UTC().Format(time.RFC3339), r.LastTS.UTC().Format(time.RFC3339),
		fmt.Sprintf("%.3f", r.Confidence), strings.Join(r.Models, " "), strings.Join(r.Nodes, " "),
		strings.Join(r.RequestKeys, " "), strings.Join(r.FindingIDs, " "), r.ReconstructionID, r.CaseID,
		string(r.Tier), strings.Join(r.Counterparts, " ")}
	for i := range rec {
		rec[i] = csvSafe(rec[i])
	}
	return rec
}

// exportJob is one export being written: the case, the tier filter, the
// manifest being filled, and what the PDFs and the manifest need from the
// rows streamed past.
type exportJob struct {
	e    Export
	cs   Case
	tier domain.Tier
	dir  string
	m    *Manifest
	// total is the whole list's row count taken at the start; read counts
	// the rows streamed (before the tier filter) and must end equal to it.
	total, read uint64
	perTenant   map[string][]AffectedRow
	findingIDs  map[string]bool
}

// run writes an export in four steps: pin the reconstruction and count its
// rows, stream the rows into CSV and JSON, write one PDF per tenant, then
// the manifest. The rows read must equal the count taken at the start, or
// the export fails: never a silent truncation.
func (x *exporter) run(ctx context.Context, e Export, cs Case, p *Principal, tier domain.Tier) (*Manifest, string, error) {
	j, err := x.prepare(ctx, e, cs, p, tier)
	if err != nil {
		return nil, "", err
	}
	if err := x.writeRows(ctx, j); err != nil {
		return nil, "", err
	}
	if err := x.writePDFs(j); err != nil {
		return nil, "", err
	}
	return x.writeManifest(ctx, j)
}

// prepare makes the export's directory, starts its manifest and pins the
// reconstruction the case page shows, with its row count.
func (x *exporter) prepare(ctx context.Context, e Export, cs Case, p *Principal, tier domain.Tier) (*exportJob, error) {
	j := &exportJob{e: e, cs: cs, tier: tier, dir: filepath.Join(x.dir, e.ID),
		perTenant: map[string][]AffectedRow{}, findingIDs: map[string]bool{}}
	if err := os.MkdirAll(filepath.Join(j.dir, "pdf"), 0o750); err != nil {
		return nil, err
	}
	j.m = &Manifest{ExportID: e.ID, CaseID: cs.ID, CaseName: cs.Name, User: p.Name, Role: p.Role, StartedAt: e.CreatedAt,
		KvtrailVersion: x.version, ExposedByTier: map[domain.Tier]int{},
		Filter: ManifestFilter{WindowFrom: cs.From, WindowTo: cs.To, Tenants: cs.Filters.Tenants,
			Nodes: cs.Filters.Nodes, Analyzers: cs.Filters.Analyzers, Tier: tier}}
	var err error
	if j.m.Filter.ReconstructionID, j.m.Filter.ChosenBy, err = x.affected.Reconstruction(ctx, cs); err != nil {
		return nil, err
	}
	if j.m.Filter.ReconstructionID != "" {
		if j.total, err = x.affected.AffectedCount(ctx, j.m.Filter.ReconstructionID, cs.Filters.Tenants); err != nil {
			return nil, err
		}
	}
	x.setProgress(e.ID, 0, j.total)
	return j, nil
}

// writeRows streams the list in keyset pages into notification.csv and
// notification.json (no row cap), keeping the rows of the job's tier, and
// remembers per tenant what its PDF needs.
func (x *exporter) writeRows(ctx context.Context, j *exportJob) error {
	cf, err := createHashed(j.dir, fileCSV)
	if err != nil {
		return err
	}
	jf, err := createHashed(j.dir, fileJSON)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(cf)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	if _, err := io.WriteString(jf, "[\n"); err != nil {
		return err
	}
	var after *AffectedKey
	for j.m.Filter.ReconstructionID != "" {
		rows, err := x.affected.AffectedPage(ctx, j.m.Filter.ReconstructionID, j.cs.Filters.Tenants, after, exportChunk)
		if err != nil {
			return err
		}
		normalizeRoles(rows)
		j.read += uint64(len(rows))
		for _, r := range keepTier(rows, j.tier) {
			if err := j.writeRow(cw, jf, r); err != nil {
				return err
			}
		}
		x.setProgress(j.e.ID, j.read, j.total)
		if len(rows) < exportChunk {
			break
		}
		last := rows[len(rows)-1]
		after = &AffectedKey{Role: last.StoredRole, Tenant: last.Tenant}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	if _, err := io.WriteString(jf, "\n]\n"); err != nil {
		return err
	}
	if j.read != j.total {
		return fmt.Errorf("export %s: read %d rows but the list has %d", j.e.ID, j.read, j.total)
	}
	for _, h := range []*hashedFile{cf, jf} {
		mf, err := h.close()
		if err != nil {
			return err
		}
		mf.Rows = j.m.RowCount
		j.m.Files = append(j.m.Files, mf)
	}
	return nil
}

// writeRow adds one row to the CSV and JSON files and to the counts.
func (j *exportJob) writeRow(cw *csv.Writer, jf io.Writer, r AffectedRow) error {
	if err := cw.Write(csvRecord(r)); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	sep := ",\n"
	if j.m.RowCount == 0 {
		sep = ""
	}
	if _, err := io.WriteString(jf, sep+string(b)); err != nil {
		return err
	}
	j.m.RowCount++
	if r.Role == domain.Received {
		j.m.Received++
	} else {
		j.m.Exposed++
		j.m.ExposedByTier[r.Tier]++
	}
	for _, f := range r.FindingIDs {
		j.findingIDs[f] = true
	}
	keep := r
	if len(keep.RequestKeys) > maxPDFKeys {
		keep.RequestKeys = keep.RequestKeys[:maxPDFKeys]
	}
	j.perTenant[r.Tenant] = append(j.perTenant[r.Tenant], keep)
	return nil
}

// writePDFs writes one PDF per tenant, in tenant order.
func (x *exporter) writePDFs(j *exportJob) error {
	tenants := make([]string, 0, len(j.perTenant))
	for t := range j.perTenant {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	j.m.Tenants = len(tenants)
	for _, t := range tenants {
		mf, err := x.writePDF(j.dir, j.cs, j.m, t, j.perTenant[t])
		if err != nil {
			return err
		}
		j.m.Files = append(j.m.Files, mf)
	}
	return nil
}

// writeManifest names the analyzer versions behind the rows and writes
// manifest.json; it returns the manifest and the file's SHA-256.
func (x *exporter) writeManifest(ctx context.Context, j *exportJob) (*Manifest, string, error) {
	ids := make([]string, 0, len(j.findingIDs))
	for f := range j.findingIDs {
		ids = append(ids, f)
	}
	sort.Strings(ids)
	var err error
	if j.m.AnalyzerVersions, err = x.versions.AnalyzerVersions(ctx, ids); err != nil {
		return nil, "", err
	}
	j.m.FinishedAt = x.now().UTC()
	b, err := json.MarshalIndent(j.m, "", "  ")
	if err != nil {
		return nil, "", err
	}
	mh, err := createHashed(j.dir, fileManifest)
	if err != nil {
		return nil, "", err
	}
	if _, err := mh.Write(append(b, '\n')); err != nil {
		return nil, "", err
	}
	mf, err := mh.close()
	if err != nil {
		return nil, "", err
	}
	return j.m, mf.SHA256, nil
}

// pdfName is a file name for a tenant's PDF: a readable, safe prefix and a
// digest of the full name so distinct tenants never collide.
func pdfName(tenant string) string {
	var b strings.Builder
	for _, r := range tenant {
		if b.Len() >= 40 {
			break
		}
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	sum := sha256.Sum256([]byte(tenant))
	return "pdf/tenant-" + b.String() + "-" + hex.EncodeToString(sum[:4]) + ".pdf"
}

func (x *exporter) writePDF(dir string, cs Case, m *Manifest, tenant string, rows []AffectedRow) (ManifestFile, error) {
	name := pdfName(tenant)
	h, err := createHashed(dir, name)
	if err != nil {
		return ManifestFile{}, err
	}
	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.SetCreator("kvtrail "+x.version, true)
	pdf.SetCreationDate(m.StartedAt)
	pdf.SetModificationDate(m.StartedAt)
	tr := pdf.UnicodeTranslatorFromDescriptor("")
	txt := func(s string) string { return tr(shown(s, 500)) }
	pdf.AddPage()
	pdf.SetFont("Helvetica", "B", 15)
	pdf.MultiCell(0, 8, txt("Tenant-isolation incident: notification summary"), "", "L", false)
	pdf.SetFont("Helvetica", "", 10)
	line := func(k, v string) {
		pdf.SetFont("Helvetica", "B", 10)
		pdf.CellFormat(45, 6, txt(k), "", 0, "L", false, 0, "")
		pdf.SetFont("Helvetica", "", 10)
		pdf.MultiCell(0, 6, txt(v), "", "L", false)
	}
	line("Tenant", tenant)
	line("Case", cs.Name+" ("+cs.ID+")")
	line("Incident window (UTC)", cs.From.UTC().Format(time.RFC3339)+" to "+cs.To.UTC().Format(time.RFC3339))
	line("Reconstruction", m.Filter.ReconstructionID)
	line("Export", m.ExportID+", by "+m.User+" at "+m.StartedAt.Format(time.RFC3339))
	for _, r := range rows {
		pdf.Ln(4)
		pdf.SetFont("Helvetica", "B", 12)
		what := "Received data from another customer's requests"
		if r.Role != domain.Received {
			what = "Data possibly exposed to another customer"
		}
		pdf.MultiCell(0, 7, txt(what), "", "L", false)
		if r.Role != domain.Received {
			line("Certainty (tier)", tierMeaning(r.Tier))
		}
		if len(r.Counterparts) > 0 {
			who := "Data received from"
			if r.Role != domain.Received {
				who = "Exposed to"
			}
			line(who, strings.Join(r.Counterparts, ", "))
		}
		line("Requests", fmt.Sprint(r.Requests))
		line("First / last (UTC)", r.FirstTS.UTC().Format(time.RFC3339)+" / "+r.LastTS.UTC().Format(time.RFC3339))
		line("Confidence", fmt.Sprintf("%.0f%%", r.Confidence*100))
		line("Models", strings.Join(r.Models, ", "))
		line("Serving nodes", strings.Join(r.Nodes, ", "))
		keys := strings.Join(r.RequestKeys, ", ")
		if uint64(len(r.RequestKeys)) < r.Requests {
			keys += fmt.Sprintf(" (first %d of %d; the CSV and JSON files list all)", len(r.RequestKeys), r.Requests)
		}
		line("Request ids", keys)
	}
	if err := pdf.Output(h); err != nil {
		h.f.Close()
		return ManifestFile{}, err
	}
	mf, err := h.close()
	mf.Tenant = tenant
	mf.Rows = uint64(len(rows))
	return mf, err
}

// tierMeaning says in a sentence what an exposed row's tier means.
func tierMeaning(t domain.Tier) string {
	switch t {
	case domain.Confirmed:
		return "confirmed: page events show the leaked read of this tenant's pages"
	case domain.Likely:
		return "likely: the allocator replay puts this tenant's data in the leaked pages under every order the logs allow"
	case domain.Possible:
		return "possible: this tenant's data was in the leaked pages under some order the logs allow (or next to them in the free list), or it was served on the same node and rank when no replay was possible"
	}
	return "not recorded by this reconstruction"
}

// --- handlers ---

func (s *server) exportCreate(c *gin.Context) {
	cs, ok := s.caseParam(c)
	if !ok {
		return
	}
	p := principal(c)
	// The tier comes as ?tier= (API) or the case page's hidden field.
	if v := c.PostForm("tier"); v != "" && c.Query("tier") == "" {
		c.Request.URL.RawQuery = url.Values{"tier": {v}}.Encode()
	}
	tier, err := tierParam(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	e, err := s.exports.start(c.Request.Context(), cs, p, tier)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !s.audit(c, p, "export_create", map[string]any{"case_id": cs.ID, "export_id": e.ID, "from": cs.From, "to": cs.To, "filters": cs.Filters, "tier": tier}, 0, http.StatusAccepted) {
		return
	}
	if isAPI(c) {
		c.JSON(http.StatusAccepted, e)
		return
	}
	c.Redirect(http.StatusSeeOther, "/exports/"+e.ID)
}

func (s *server) exportParam(c *gin.Context) (Export, bool) {
	id := c.Param("id")
	if !idPattern.MatchString(id) {
		s.fail(c, errNotFound)
		return Export{}, false
	}
	e, err := s.exports.store.GetExport(c.Request.Context(), id)
	if err != nil {
		s.fail(c, err)
		return Export{}, false
	}
	return s.exports.withProgress(e), true
}

func (s *server) exportView(c *gin.Context) {
	e, ok := s.exportParam(c)
	if !ok {
		return
	}
	// Who looked at a notification list (and its manifest) is audited like
	// who downloaded it.
	if !s.audit(c, principal(c), "export_view", map[string]any{"export_id": e.ID, "case_id": e.CaseID, "status": e.Status}, int64(e.Rows), http.StatusOK) {
		return
	}
	if isAPI(c) {
		c.JSON(http.StatusOK, e)
		return
	}
	refresh := 0
	if e.Status == "running" {
		refresh = 2
	}
	s.renderTitled(c, http.StatusOK, "export", "Export "+e.ID, e, refresh)
}

func (s *server) caseExports(c *gin.Context) {
	cs, ok := s.caseParam(c)
	if !ok {
		return
	}
	ex, err := s.exports.store.ListExports(c.Request.Context(), cs.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	for i := range ex {
		ex[i] = s.exports.withProgress(ex[i])
	}
	c.JSON(http.StatusOK, gin.H{"case_id": cs.ID, "exports": ex})
}

// exportFile serves one file named in the manifest (or the manifest).
// Names come from the manifest, never from the path, so nothing outside
// the export's directory can be reached.
func (s *server) exportFile(c *gin.Context) {
	e, ok := s.exportParam(c)
	if !ok {
		return
	}
	want := strings.TrimPrefix(c.Param("name"), "/")
	if e.Status != "done" || e.Manifest == nil {
		s.fail(c, errNotFound)
		return
	}
	name := ""
	if want == fileManifest {
		name = fileManifest
	}
	for _, f := range e.Manifest.Files {
		if f.Name == want {
			name = f.Name
		}
	}
	if name == "" {
		s.fail(c, errNotFound)
		return
	}
	f, err := os.Open(filepath.Join(s.exports.dir, e.ID, filepath.FromSlash(name)))
	if err != nil {
		s.fail(c, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		s.fail(c, err)
		return
	}
	if !s.audit(c, principal(c), "export_download", map[string]any{"export_id": e.ID, "case_id": e.CaseID, "file": name}, int64(e.Rows), http.StatusOK) {
		return
	}
	ctype := map[string]string{".csv": "text/csv; charset=utf-8", ".json": "application/json", ".pdf": "application/pdf"}[filepath.Ext(name)]
	c.Header("Content-Type", ctype)
	c.Header("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s"`, e.ID, strings.ReplaceAll(name, "/", "-")))
	http.ServeContent(c.Writer, c.Request, "", st.ModTime(), f)
}
