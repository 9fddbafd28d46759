package analyze

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// Affected roles.
const (
	RoleReceived = domain.Received // answered from pages the tenant did not write
	RoleExposed  = domain.Exposed  // the tenant's KV may have been read by another tenant's request
)

// ReconstructionVersion changes when the folding rules change.
const ReconstructionVersion = "2"

// AffectedRow is one line of the notification list.
type AffectedRow = domain.AffectedRow

// Reconstruction is one build of the notification list.
type Reconstruction struct {
	ID      string
	CaseID  string
	Created time.Time
	// Rows are the list's rows. Those of a stored reconstruction
	// (Reconstruct, Report.Reconstruction) carry no request keys, finding
	// ids or evidence lines: the server folded those
	// (domain.AffectedStage), and AffectedRows or LatestAffected read them
	// back.
	Rows []AffectedRow
	// stage holds the keys, finding ids and lines of Rows until they are
	// stored.
	stage domain.AffectedStage
}

type victim struct {
	key string
	// req is what the window knows of the victim's request (nil: nothing).
	req    *domain.RequestSummary
	tenant string
	room   uint64
	conf   float64
	// findings are the victim's findings by their index in the
	// reconstruction's table of victim findings (collectVictims' ids).
	findings []int32
	ts       time.Time
	nodes    []string
	evidence []uint64
	// sources: request keys (or room:N) with tenant, tier and pages.
	sources map[string]*source
}

type source struct {
	key, tenant, model, node string
	ts                       time.Time
	conf                     float64
	findings                 []int32 // as victim.findings
	tier                     domain.Tier
	promptTok, outputTok     int64
	lines                    []uint64
}

// better keeps the more certain tier (and the larger page counts) and
// adds the lines that show it.
func (s *source) better(t domain.Tier, prompt, output int64, lines ...[]uint64) {
	if s.tier == "" || t.Rank() < s.tier.Rank() {
		s.tier = t
	}
	s.promptTok = max(s.promptTok, prompt)
	s.outputTok = max(s.outputTok, output)
	for _, l := range lines {
		s.lines = append(s.lines, l...)
	}
}

// windowBefore is how far back the no-replay fallback looks on a victim's
// decode node and rank for tenants whose data may have been in its pages.
const windowBefore = 4 * time.Hour

// Reconstruct folds the latest findings into the per-tenant list and
// stores it; the victim findings' foreign tenants and request keys are
// filled from it and written back to the findings table. Sources (whose
// KV a victim read) come from page-level events when the decode node
// logged them (confirmed), else from the allocator replay (likely /
// possible), plus what findings name (aborted rooms, metadata rooms).
func (r *Runner) Reconstruct(ctx context.Context, d *Dataset) (*Reconstruction, error) {
	return r.reconstruct(ctx, d, nil, false)
}

// reconstruct is Reconstruct with held: findings of this run not stored
// yet (its victims), which it stores with their foreign tenants — or,
// when it fails first, as they are, so the runs' findings are all there.
// Only findings of earlier runs get their foreign tenants by a mutation.
// last says nothing asks d's allocator replay after it (the run's
// conclusion): the replay's answers are let go once the list is built,
// before it is stored.
//
// The victims are folded in groups (victimSet), their findings read back
// from local disk a group at a time, and what the fold gives each finding
// goes back to local disk until the list is stored: what the heap holds
// follows a group, not the window's victims.
func (r *Runner) reconstruct(ctx context.Context, d *Dataset, held *heldFindings, last bool) (rec *Reconstruction, err error) {
	if held == nil {
		held = &heldFindings{}
	}
	stored := false
	defer func() {
		if !stored {
			err = errors.Join(err, r.saveHeld(ctx, held))
		}
	}()
	vs, named, err := r.victimSet(ctx, held)
	if err != nil {
		return nil, err
	}
	defer vs.close()
	if err := d.ensureRequests(ctx, named, nil); err != nil {
		return nil, err
	}
	named = nil
	stage := r.DB.StageAffected()
	defer func() {
		if err != nil && stage != nil {
			err = errors.Join(err, stage.Discard(ctx))
		}
	}()
	fold, err := newVictimFold(ctx, d, &vs.rooms, stage)
	if err != nil {
		return nil, err
	}
	vs.group(d, reconstructGroup)
	// What the fold gives the findings, until the list is stored: this
	// run's findings whole, and the earlier runs' whose lists changed.
	var done, earlier findingSpill
	done.spill.name, earlier.spill.name = "folded victim findings", "changed stored findings"
	defer done.close()
	defer earlier.close()
	for g := range vs.groups {
		fs, isHeld, err := vs.read(g)
		if err != nil {
			return nil, err
		}
		updated, err := fold.group(ctx, fs)
		if err != nil {
			return nil, err
		}
		var changed []Finding
		for _, u := range updated {
			fs[u.at].ForeignTenants, fs[u.at].ForeignRequestKeys = u.tenants, u.keys
			if !isHeld[u.at] {
				changed = append(changed, fs[u.at])
			}
		}
		for i := range fs {
			if isHeld[i] {
				if err := done.put(&fs[i]); err != nil {
					return nil, err
				}
			}
		}
		if err := earlier.add(changed); err != nil {
			return nil, err
		}
	}
	if done.spill.n != held.len() {
		return nil, fmt.Errorf("reconstruction: %d of %d held victim findings folded", done.spill.n, held.len())
	}
	if rec, err = fold.finish(); err != nil {
		return nil, err
	}
	if last {
		d.dropReplayAnswers()
	}
	rec.Created = r.now()
	rec.CaseID = r.CaseID
	// Save discards the stage itself when it fails.
	st := rec.stage
	rec.stage, stage = nil, nil
	if err := st.Save(ctx, rec.ID, rec.CaseID, rec.Created, rec.Rows); err != nil {
		return nil, err
	}
	stored = true
	now := r.now()
	if err := done.each(streamBatch, func(fs []Finding) error { return r.DB.SaveFindings(ctx, fs, now) }); err != nil {
		return nil, err
	}
	if err := earlier.each(streamBatch, func(fs []Finding) error { return r.DB.SaveFindingForeign(ctx, fs) }); err != nil {
		return nil, err
	}
	return rec, nil
}

// saveHeld stores the held findings whole, as they read now, in inserts
// of streamBatch, all with one creation time.
func (r *Runner) saveHeld(ctx context.Context, held *heldFindings) error {
	now := r.now()
	return held.each(streamBatch, func(fs []Finding) error { return r.DB.SaveFindings(ctx, fs, now) })
}

// buildReconstruction folds the list in memory, every row whole: the
// reference the tests hold the server's fold to.
func buildReconstruction(ctx context.Context, d *Dataset, fs []Finding) (*Reconstruction, error) {
	rec, _, err := buildReconstructionFindings(ctx, d, fs, nil)
	return rec, err
}

// buildReconstructionFindings also returns the new foreign tenants and
// request keys of the victim findings whose lists the reconstruction
// changed, in the order of fs. It folds fs as one group (victimFold).
// With a stage, the rows' request keys, finding ids and evidence lines
// go to it as they are folded, and the reconstruction returned carries
// it to be saved (nil: the rows are folded whole in memory); on an error
// it is discarded.
func buildReconstructionFindings(ctx context.Context, d *Dataset, fs []Finding, stage domain.AffectedStage) (
	rec *Reconstruction, updated []foreignUpdate, err error) {
	if stage != nil {
		defer func() {
			if err != nil {
				err = errors.Join(err, stage.Discard(ctx))
			}
		}()
	}
	if err := d.ensureRequests(ctx, namedKeys(fs), nil); err != nil {
		return nil, nil, err
	}
	var rooms victimRooms
	for i := range fs {
		rooms.add(&fs[i])
	}
	fold, err := newVictimFold(ctx, d, &rooms, stage)
	if err != nil {
		return nil, nil, err
	}
	if updated, err = fold.group(ctx, fs); err != nil {
		return nil, nil, err
	}
	rec, err = fold.finish()
	return rec, updated, err
}

// victimFold folds victim findings into the notification list a group at
// a time: a group holds every finding of its victim requests, and every
// victim of a room (a room's lineage is all its victims'), so the list
// and each finding's foreign lists come out as from one fold of all.
type victimFold struct {
	d    *Dataset
	pr   *pageReplay
	est  lineageView
	list affectedList
}

// newVictimFold asks the allocator replay once for every victim of rooms
// (all the victims the groups will bring), before any group is folded.
func newVictimFold(ctx context.Context, d *Dataset, rooms *victimRooms, stage domain.AffectedStage) (*victimFold, error) {
	pr, err := d.Pages(ctx)
	if err != nil {
		return nil, err
	}
	// The same choice the Runner makes when it notes victims for the
	// shared replay (replay_shared.go), so the replay abort_reuse ran
	// already answers for them.
	want, placeholder := rooms.wants(d, pr)
	est, err := d.lineage(ctx, placeholder, want)
	if err != nil {
		return nil, err
	}
	f := &victimFold{d: d, pr: pr, est: est, list: affectedList{rows: map[string]*affectedAcc{}}}
	if stage != nil {
		f.list.stage = &listStage{ctx: ctx, to: stage}
	}
	return f, nil
}

// group folds one group's findings and returns the new foreign lists of
// those it changed, by index in fs. The steps: the victims and the
// sources their findings name; the page or replayed lineage of each
// victim's pages and the writers it names; the node window where neither
// exists; the fold into per-tenant rows, which takes each victim's
// foreign tenants for its findings.
func (vf *victimFold) group(ctx context.Context, fs []Finding) (updated []foreignUpdate, err error) {
	d, pr, est, list := vf.d, vf.pr, vf.est, &vf.list
	base := int32(len(list.findingIDs))
	victims, ids, victimFindings := collectVictims(d, fs, list.findingIDs)
	list.findingIDs = ids
	replayed, fallback, knownLineage, byRoom := sortVictims(victims, pr, est)
	// Each victim is folded as soon as its sources are complete and its
	// sources dropped, so only one victim's sources are held at a time
	// (the fold is the same in any order: see affectedList.sorted).
	// A victim's findings take the foreign tenants and request keys of
	// the sources that made it a receiver as it is folded: kept per victim
	// to the end, those were 42 MiB at scale 100. Only the new lists are
	// kept, not the findings: a copy of each was 37 MiB there.
	fold := func(v *victim) {
		if refs := list.foldVictim(v, v.room != 0 && knownLineage[v.room]); len(refs) > 0 {
			tenants, keys := foreignOf(refs)
			for _, fi := range v.findings {
				at := victimFindings[fi-base]
				if f, ok := withForeign(fs[at], tenants, keys); ok {
					updated = append(updated, foreignUpdate{at: at, tenants: f.ForeignTenants, keys: f.ForeignRequestKeys})
				}
			}
		}
		v.sources = nil
	}
	// The victims with a lineage, in batches: the owners of their writers
	// are read a batch at a time, so what the reads hold follows a batch,
	// not the window's victims (the owners of all of them were 48 MiB at
	// scale 100, their page counts more). A batch takes victims until
	// their writers fill one read's list: each read scans the window's
	// saved facts, and batches of 4096 victims took 11 reads where one
	// list of all took 5 (13 s more at scale 100).
	for len(replayed) > 0 {
		lineage, writerRooms, n, err := batchLineage(d, replayed, byRoom, pr, est, ownersPerRead)
		if err != nil {
			return nil, err
		}
		batch := replayed[:n]
		replayed = replayed[n:]
		owners, err := roomOwners(ctx, d, writerRooms)
		if err != nil {
			return nil, err
		}
		for _, v := range batch {
			addLineageSources(v, lineage[v.room], owners)
			fold(v)
		}
		if list.stage != nil && list.stage.err != nil {
			return nil, list.stage.err
		}
	}
	// No replay possible (no room, no DP rank, no decode boot): every other
	// tenant served on the same decode node and rank in the hours before.
	if err := addWindowSources(ctx, d, fallback, fold); err != nil {
		return nil, err
	}
	if list.stage != nil && list.stage.err != nil {
		return nil, list.stage.err
	}
	// In the order of fs, as the findings were read.
	slices.SortFunc(updated, func(a, b foreignUpdate) int { return cmp.Compare(a.at, b.at) })
	return updated, nil
}

// finish ends the fold: the list's rows, and its id from the window and
// the victim findings folded.
func (vf *victimFold) finish() (*Reconstruction, error) {
	list := &vf.list
	var stage domain.AffectedStage
	if list.stage != nil {
		stage = list.stage.to
	}
	rec := &Reconstruction{Rows: list.sorted(), stage: stage}
	if list.stage != nil && list.stage.err != nil {
		return nil, list.stage.err
	}
	ids := uniqSortedStr(slices.Clone(list.findingIDs))
	h := sha256.Sum256([]byte(ReconstructionVersion + "\x00" + vf.d.Window.String() + "\x00" + strings.Join(ids, ",")))
	rec.ID = hex.EncodeToString(h[:12])
	return rec, nil
}

// collectVictims gathers the victims of the findings that mark victims
// (VictimSeverity), keyed by request, with the sources the findings name
// themselves (aborted rooms, metadata slots). A victim's tenant, room
// and time are its first finding's in domain.SortFindings' order, as
// victimRooms chooses. It returns the victims, the ids of those findings
// appended to ids (the table victim.findings indexes, of this and earlier
// groups) and, per id appended, its finding's index in fs.
func collectVictims(d *Dataset, fs []Finding, ids []string) (victims map[string]*victim, _ []string, victimFindings []int) {
	victims = map[string]*victim{}
	first := map[*victim]findingOrder{}
	for i, f := range fs {
		if !marksVictim(f.Analyzer, &f) {
			continue
		}
		ids = append(ids, f.ID)
		fi := int32(len(ids) - 1)
		victimFindings = append(victimFindings, i)
		v := victims[f.RequestKey]
		o := orderOf(&f)
		switch {
		case v == nil:
			v = &victim{key: f.RequestKey, req: d.request(f.RequestKey), tenant: f.Tenant, room: f.Room, ts: f.TS,
				sources: map[string]*source{}}
			victims[f.RequestKey] = v
			first[v] = o
		case o.before(first[v]):
			v.tenant, v.room, v.ts = f.Tenant, f.Room, f.TS
			first[v] = o
		}
		v.conf = max(v.conf, f.Confidence)
		v.findings = append(v.findings, fi)
		v.evidence = append(v.evidence, f.Evidence...)
		v.nodes = append(v.nodes, f.PrefillNode, f.DecodeNode)
		for _, k := range f.ForeignRequestKeys {
			if f.Analyzer == "transfer_mismatch" {
				continue // page lineage is added below with page counts
			}
			s := v.sources[k]
			if s == nil {
				s = &source{key: k}
				if sf := d.request(k); sf != nil {
					s.tenant, s.model, s.ts, s.node = sf.Tenant, sf.Model, sf.TS, sf.DecodeNode
				}
				v.sources[k] = s
			}
			s.conf = max(s.conf, f.Confidence)
			s.findings = append(s.findings, fi)
			// A room a finding names (the aborted room, the metadata
			// slot's room) is confirmed when page events showed the read,
			// else the writer under the finding's own reading.
			t := domain.Likely
			if f.Confidence >= 1 {
				t = domain.Confirmed
			}
			s.better(t, 0, 0, f.Evidence)
		}
	}
	return victims, ids, victimFindings
}

// lineageEntry is one tier of a victim's lineage: the writer rooms of its
// pages with their page counts, the page size and the lines that show it.
type lineageEntry struct {
	tier  domain.Tier
	src   map[uint64]*SourcePages
	ps    int
	lines []uint64
}

// ownersPerRead is how many writer rooms a batch of the reconstruction's
// victims names at most, unless one victim names more (a variable: tests
// make it small).
var ownersPerRead = domain.IDsPerList

// hasLineage reports whether a victim's pages have a lineage: from the
// page events when its decode node logged them, else from the allocator
// replay.
func hasLineage(v *victim, pr *pageReplay, est lineageView) bool {
	return v.room != 0 && ((pr != nil && pr.Nodes[decodeNodeOf(v)]) || est.has(v.room))
}

// sortVictims parts the victims into those with a lineage (replayed, in
// key order) and those without (fallback: the node window), and returns
// the rooms whose lineage is known and the victims of each room with one
// (a room's lineage is all its victims', which a room logged twice
// shares).
func sortVictims(victims map[string]*victim, pr *pageReplay, est lineageView) (
	replayed, fallback []*victim, knownLineage map[uint64]bool, byRoom map[uint64][]*victim) {
	knownLineage, byRoom = map[uint64]bool{}, map[uint64][]*victim{}
	for _, k := range sortedKeys(victims) {
		v := victims[k]
		if !hasLineage(v, pr, est) {
			fallback = append(fallback, v)
			continue
		}
		replayed = append(replayed, v)
		knownLineage[v.room] = true
		byRoom[v.room] = append(byRoom[v.room], v)
	}
	return replayed, fallback, knownLineage, byRoom
}

// batchLineage takes the next batch of victims: as many as name at most
// maxWriters writer rooms together, and at least one. It returns their
// lineage by room, the writer rooms it names (each once) and how many
// victims it took. A room's lineage comes from the page events when the
// victim's decode node logged them (confirmed), else from the allocator
// replay (likely and possible).
func batchLineage(d *Dataset, victims []*victim, byRoom map[uint64][]*victim, pr *pageReplay, est lineageView,
	maxWriters int) (lineage map[uint64][]lineageEntry, writerRooms []uint64, n int, err error) {
	lineage = map[uint64][]lineageEntry{}
	named := map[uint64]bool{}
	for n < len(victims) {
		b := victims[n]
		if _, done := lineage[b.room]; done {
			n++
			continue
		}
		var entries []lineageEntry
		for _, v := range byRoom[b.room] {
			node := decodeNodeOf(v)
			switch {
			case pr != nil && pr.Nodes[node]:
				if rd := pr.Reads[v.room]; rd != nil {
					src := map[uint64]*SourcePages{}
					for w, n := range rd.Stale {
						src[w] = &SourcePages{Prompt: n - rd.StaleOutput[w], Output: rd.StaleOutput[w], Lines: rd.Lines}
					}
					entries = append(entries, lineageEntry{domain.Confirmed, src, pageSizeAt(d, node, v.ts), rd.Lines})
				}
			default:
				e, err := est.get(v.room)
				if err != nil {
					return nil, nil, 0, err
				}
				entries = append(entries, lineageEntry{domain.Likely, e.Likely, e.PageSize, e.Lines},
					lineageEntry{domain.Possible, e.Possible, e.PageSize, e.Lines})
			}
		}
		more := len(writerRooms)
		for _, l := range entries {
			for w := range l.src {
				if !named[w] {
					named[w] = true
					writerRooms = append(writerRooms, w)
				}
			}
		}
		if n > 0 && len(writerRooms) > maxWriters {
			// The batch is full without this victim: its writers wait
			// for the next batch.
			writerRooms = writerRooms[:more]
			break
		}
		lineage[b.room] = entries
		n++
	}
	return lineage, writerRooms, n, nil
}

// addLineageSources adds a victim's lineage writers as sources: the
// client request that owns the writer room (it may predate the window),
// at the lineage's tier, with a confidence scaled by the writer's share of
// the victim's stale pages.
func addLineageSources(v *victim, lineage []lineageEntry, owners map[uint64]owner) {
	for _, l := range lineage {
		total := 0
		for _, n := range l.src {
			total += n.Prompt + n.Output
		}
		for w, n := range l.src {
			o, ok := owners[w]
			if !ok {
				o = owner{key: "room:" + itoa(w)}
			}
			s := v.sources[o.key]
			if s == nil {
				s = &source{key: o.key, tenant: o.tenant, model: o.model, node: o.node, ts: o.ts}
				v.sources[o.key] = s
			}
			c := v.conf
			switch l.tier {
			case domain.Likely:
				c *= 0.6 + 0.3*float64(n.Prompt+n.Output)/float64(max(total, 1))
			case domain.Possible:
				c *= 0.2 + 0.2*float64(n.Prompt+n.Output)/float64(max(total, 1))
			}
			s.conf = max(s.conf, c)
			s.findings = append(s.findings, v.findings...)
			s.better(l.tier, int64(n.Prompt*l.ps), int64(n.Output*l.ps), l.lines, n.Lines)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// affectedAcc accumulates one row of the notification list.
//
// Its request keys and findings grow with the victims, and were each kept
// in a map beside the row's list to add them once: at scale 100 those
// maps were 87 MiB of the 550 in use at the reconstruction's peak, the
// lists 33 more. The request keys are now one list compacted (sorted,
// duplicates dropped) as it grows, as the evidence is: the same writer
// comes with every victim that read its pages. The findings are a bit
// each in the reconstruction's table of victim findings, which is all a
// row's findings can be.
type affectedAcc struct {
	row                AffectedRow
	cps, models, nodes map[string]bool
	finds              bitSet
	// keysUniq and evidenceUniq are how much of row.RequestKeys and
	// row.Evidence was sorted and unique when last compacted.
	keysUniq, evidenceUniq int
}

// bitSet is a set of small non-negative integers.
type bitSet []uint64

func (b *bitSet) add(i int32) {
	w := int(i >> 6)
	if w >= len(*b) {
		*b = append(*b, make([]uint64, w+1-len(*b))...)
	}
	(*b)[w] |= 1 << (uint(i) & 63)
}

// each calls f with the members in increasing order.
func (b bitSet) each(f func(int)) {
	for w, x := range b {
		for x != 0 {
			f(w<<6 | bits.TrailingZeros64(x))
			x &= x - 1
		}
	}
}

// compactAbove is when a list kept unique by compaction is compacted
// again: once it has grown by half what it held unique, and by at least
// 4096, so each value added pays for a bounded share of one sort (at
// most three values sorted for each one added).
func compactAbove(uniq int) int { return uniq + uniq/2 + 4096 }

// uniqSorted sorts v and drops its duplicates, in place.
func uniqSorted[T cmp.Ordered](v []T) []T {
	slices.Sort(v)
	return slices.Compact(v)
}

// has reports whether s is in set, adding it when not.
func has(set map[string]bool, s string) bool {
	if set[s] {
		return true
	}
	set[s] = true
	return false
}

// affectedList is the notification list being folded, by role and tenant.
type affectedList struct {
	rows map[string]*affectedAcc
	// findingIDs is the table of victim findings the rows' finds index.
	findingIDs []string
	// stage, when set, takes the rows' request keys, evidence lines and
	// (in sorted) finding ids instead of the rows: they grow with the
	// exposed requests and the victims (868,775 keys, 29 MiB of lines and
	// 1.3M finding ids across the rows at incident-2026 scale 100), the
	// rest of a row with the tenants, nodes and models.
	stage *listStage
}

// listStage is a domain.AffectedStage being fed by a fold, which has no
// error to return: the first error is kept, and nothing more is sent.
type listStage struct {
	ctx context.Context
	to  domain.AffectedStage
	err error
}

func (s *listStage) addFinding(role domain.Role, tenant, id string) {
	if s.err == nil {
		s.err = s.to.AddFinding(s.ctx, role, tenant, id)
	}
}

func (s *listStage) add(role domain.Role, tenant, key string, lines ...[]uint64) {
	if s.err != nil {
		return
	}
	s.err = s.to.AddKey(s.ctx, role, tenant, key)
	for _, l := range lines {
		if s.err == nil && len(l) > 0 {
			s.err = s.to.AddLines(s.ctx, role, tenant, l)
		}
	}
}

// add counts one request (and its findings, tokens and evidence) on the
// row of tenant's role; counterpart is the other side's tenant.
func (l affectedList) add(role domain.Role, tier domain.Tier, tenant, key, model, node string, ts time.Time, conf float64,
	findings []int32, counterpart string, prompt, output int64, evidence, more []uint64, nodes ...string) {
	if tenant == "" {
		return
	}
	k := string(role) + "\x00" + tenant
	a := l.rows[k]
	if a == nil {
		a = &affectedAcc{row: AffectedRow{Tenant: tenant, Role: role},
			cps: map[string]bool{}, models: map[string]bool{}, nodes: map[string]bool{}}
		l.rows[k] = a
	}
	if tier != "" && (a.row.Tier == "" || tier.Rank() < a.row.Tier.Rank()) {
		a.row.Tier = tier
	}
	if l.stage != nil {
		l.stage.add(role, tenant, key, evidence, more)
	} else {
		a.keep(key, evidence, more)
	}
	for _, f := range findings {
		a.finds.add(f)
	}
	if counterpart != "" && counterpart != tenant && !has(a.cps, counterpart) {
		a.row.Counterparts = append(a.row.Counterparts, counterpart)
	}
	a.row.PromptTokens += prompt
	a.row.OutputTokens += output
	if !ts.IsZero() && (a.row.First.IsZero() || ts.Before(a.row.First)) {
		a.row.First = ts
	}
	if ts.After(a.row.Last) {
		a.row.Last = ts
	}
	if model != "" && !has(a.models, model) {
		a.row.Models = append(a.row.Models, model)
	}
	if !has(a.nodes, node) {
		a.row.Nodes = append(a.row.Nodes, node)
	}
	for _, n := range nodes {
		if !has(a.nodes, n) {
			a.row.Nodes = append(a.row.Nodes, n)
		}
	}
	a.row.Confidence = max(a.row.Confidence, conf)
}

// keep adds a request key and evidence lines to the row itself (no stage).
func (a *affectedAcc) keep(key string, evidence, more []uint64) {
	a.row.RequestKeys = append(a.row.RequestKeys, key)
	if len(a.row.RequestKeys) > compactAbove(a.keysUniq) {
		a.row.RequestKeys = uniqSorted(a.row.RequestKeys)
		a.keysUniq = len(a.row.RequestKeys)
	}
	a.row.Evidence = append(a.row.Evidence, evidence...)
	a.row.Evidence = append(a.row.Evidence, more...)
	if len(a.row.Evidence) > compactAbove(a.evidenceUniq) {
		a.row.Evidence = uniqSortedU64(a.row.Evidence)
		a.evidenceUniq = len(a.row.Evidence)
	}
}

// foldVictim adds one victim: each source of another tenant is exposed,
// and the victim's tenant received (from those counterparts) when a
// source makes it foreign or nothing at all is known of its pages. It
// returns the sources that made the victim a receiver.
func (rows affectedList) foldVictim(v *victim, lineageKnown bool) (foreign []foreignRef) {
	known := lineageKnown || len(v.sources) > 0
	var counterparts []string
	// The victim's evidence goes to each exposed tenant's row once, not
	// once per source: the rows keep their evidence unique anyway, and at
	// incident-2026 scale 100 the copies (a victim's lines times its
	// dozens of sources) were compacted away again and again, 11 of the
	// reconstruction's 106 CPU-seconds.
	given := map[string]bool{}
	for _, sk := range sortedKeys(v.sources) {
		s := v.sources[sk]
		if s.tenant == "" || s.tenant == v.tenant {
			continue
		}
		evidence := v.evidence
		if has(given, s.tenant) {
			evidence = nil
		}
		rows.add(RoleExposed, s.tier, s.tenant, s.key, s.model, s.node, s.ts, s.conf, s.findings, v.tenant,
			s.promptTok, s.outputTok, evidence, s.lines)
		// With a replayed or exact lineage, only confirmed or likely
		// writers make the victim's tenant a receiver; without one,
		// the possible writers are all there is.
		if s.tier != domain.Possible || !lineageKnown {
			counterparts = append(counterparts, s.tenant)
			foreign = append(foreign, foreignRef{tenant: s.tenant, key: s.key})
		}
	}
	conf := v.conf
	if known && len(foreign) == 0 {
		return nil
	}
	if !known {
		// No lineage at all: assume foreign, at lower confidence.
		conf = v.conf * 0.5
	}
	model := ""
	if v.req != nil {
		model = v.req.Model
	}
	for _, c := range uniqSortedStr(counterparts) {
		rows.add(RoleReceived, "", v.tenant, v.key, model, "", v.ts, conf, v.findings, c, 0, 0, v.evidence, nil, v.nodes...)
	}
	if len(counterparts) == 0 {
		rows.add(RoleReceived, "", v.tenant, v.key, model, "", v.ts, conf, v.findings, "", 0, 0, v.evidence, nil, v.nodes...)
	}
	return foreign
}

// foreignRef is a source that made a victim a receiver: its tenant and
// request key, all withForeign reads of it.
type foreignRef struct{ tenant, key string }

// sorted finishes the rows (counts, sorted and unique lists) in list
// order: received first, then exposed from the most certain tier down.
// With a stage the rows have no keys, finding ids or lines (the stage has
// them), and their Requests are counted when they are saved.
func (l affectedList) sorted() []AffectedRow {
	var out []AffectedRow
	for _, a := range l.rows {
		if l.stage == nil {
			a.row.RequestKeys = uniqSorted(a.row.RequestKeys)
			a.row.Requests = len(a.row.RequestKeys)
		}
		if l.stage != nil {
			a.finds.each(func(i int) { l.stage.addFinding(a.row.Role, a.row.Tenant, l.findingIDs[i]) })
		} else {
			a.finds.each(func(i int) { a.row.FindingIDs = append(a.row.FindingIDs, l.findingIDs[i]) })
		}
		a.finds = nil
		a.row.Models = uniqSortedStr(a.row.Models)
		a.row.Nodes = uniqSortedStr(a.row.Nodes)
		a.row.Counterparts = uniqSortedStr(a.row.Counterparts)
		if l.stage == nil {
			a.row.Evidence = uniqSortedU64(a.row.Evidence)
		}
		slices.Sort(a.row.FindingIDs)
		a.row.FindingIDs = slices.Compact(a.row.FindingIDs)
		a.row.Confidence = clamp01(a.row.Confidence)
		out = append(out, a.row)
	}
	sortList(out)
	return out
}

// foreignOf is the tenants and request keys of refs, each sorted and
// unique.
func foreignOf(refs []foreignRef) (tenants, keys []string) {
	tenants, keys = make([]string, len(refs)), make([]string, len(refs))
	for i, s := range refs {
		tenants[i], keys[i] = s.tenant, s.key
	}
	return uniqSortedStr(tenants), uniqSortedStr(keys)
}

// withForeign is a victim finding with a victim's foreign tenants and
// request keys (foreignOf) added, and whether that changed it. A finding
// that named none (every HIGH finding) is given the victim's slices
// themselves, which its other findings share: a copy each was 126 MiB at
// the scale-100 analysis's peak, where a victim has three or four
// findings. Nothing changes a finding's lists in place.
func withForeign(f Finding, tenants, keys []string) (Finding, bool) {
	tn, ks := tenants, keys
	if len(f.ForeignTenants) > 0 {
		tn = uniqSortedStr(append(slices.Clip(tenants), f.ForeignTenants...))
	}
	if len(f.ForeignRequestKeys) > 0 {
		ks = uniqSortedStr(append(slices.Clip(keys), f.ForeignRequestKeys...))
	}
	if slices.Equal(tn, uniqSortedStr(f.ForeignTenants)) && slices.Equal(ks, uniqSortedStr(f.ForeignRequestKeys)) {
		return f, false
	}
	f.ForeignTenants, f.ForeignRequestKeys = tn, ks
	return f, true
}

// foreignUpdate is the new foreign tenants and request keys withForeign
// gave a victim finding, at its index in the findings the reconstruction
// read.
type foreignUpdate struct {
	at            int
	tenants, keys []string
}

func decodeNodeOf(v *victim) string {
	if v.req != nil {
		return v.req.DecodeNode
	}
	return ""
}

func pageSizeAt(d *Dataset, node string, t time.Time) int {
	if b := d.Boots.At(node, t); b != nil && b.PageSize > 0 {
		return int(b.PageSize)
	}
	return 1
}

// namedKeys lists the requests the victim findings name: the victims and
// the sources the findings give themselves.
func namedKeys(fs []Finding) []string {
	var keys []string
	for i := range fs {
		f := &fs[i]
		if !marksVictim(f.Analyzer, f) {
			continue
		}
		keys = append(keys, f.RequestKey)
		keys = append(keys, f.ForeignRequestKeys...)
	}
	return keys
}

// owner is the client request that owns a writer room: what a lineage
// source needs of it.
type owner struct {
	key, tenant, model, node string
	ts                       time.Time
}

// roomOwners maps writer rooms to their client requests (bulk queries;
// writers may predate the window). A writer this run saved but does not
// hold is named from its saved row, not linked again: a writer needs only
// its key, tenant, model, time and decode node, and linking every writer
// of every victim held their lines (a quarter of the heap at 2M requests).
// The rows are read without their lines, and an owner keeps only those
// five: a batch names up to domain.IDsPerList writers, and their rows with
// lines, read in full and then copied twice, were 103 MiB of the 445 in
// use at the scale-100 reconstruction's peak.
func roomOwners(ctx context.Context, d *Dataset, rooms []uint64) (map[uint64]owner, error) {
	out := map[uint64]owner{}
	var unheld, missing []uint64
	for _, r := range uniqSortedU64(rooms) {
		f := d.requestIn(r)
		if f != nil && f.Tenant != "" {
			out[r] = owner{key: f.Key, tenant: f.Tenant, model: f.Model, ts: f.TS, node: f.DecodeNode}
			continue
		}
		if r != 0 && f == nil && !d.complete {
			unheld = append(unheld, r)
			continue
		}
		missing = append(missing, r)
	}
	if len(unheld) > 0 {
		refs, err := d.DB.RoomOwnerRefs(ctx, d.readVersion(), d.Window.From, d.Window.To, unheld)
		if err != nil {
			return nil, fmt.Errorf("owners of writer rooms: %w", err)
		}
		// The last ref of a room in the refs' order names it, as a map
		// of the refs by room did; one without a tenant names nobody.
		named := make(map[uint64]bool, len(refs))
		for _, ref := range refs {
			if !d.Window.Contains(ref.TS) {
				continue
			}
			named[ref.Room] = ref.Tenant != ""
			if ref.Tenant != "" {
				out[ref.Room] = owner{key: ref.Key, tenant: ref.Tenant, model: ref.Model, ts: ref.TS, node: ref.DecodeNode}
			}
		}
		for _, r := range unheld {
			if !named[r] {
				delete(out, r)
				missing = append(missing, r)
			}
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	gw, err := d.DB.RoomOwners(ctx, missing)
	if err != nil {
		return nil, err
	}
	for _, g := range gw {
		out[g.Room] = owner{key: g.RequestID, tenant: g.Tenant, model: g.Model, ts: g.TS}
	}
	return out, nil
}

// Tier aliases domain.Tier for callers of this package.
type Tier = domain.Tier

// Exposure tiers, most certain first.
const (
	Confirmed = domain.Confirmed
	Likely    = domain.Likely
	Possible  = domain.Possible
)
