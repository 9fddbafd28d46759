package analyze

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
const ReconstructionVersion = "1"

// AffectedRow is one line of the notification list.
type AffectedRow = domain.AffectedRow

// Reconstruction is one build of the notification list.
type Reconstruction struct {
	ID      string
	CaseID  string
	Created time.Time
	Rows    []AffectedRow
}

type victim struct {
	key        string
	fact       *Fact
	tenant     string
	room       uint64
	conf       float64
	findings   []string
	ts         time.Time
	nodes      []string
	placeholer bool
	// sources: request keys (or room:N) with tenant and confidence.
	sources map[string]*source
}

type source struct {
	key, tenant, model, node string
	ts                       time.Time
	conf                     float64
	findings                 []string
}

// Reconstruct folds the latest findings into the per-tenant list and
// stores it. Sources (whose KV a victim read) come from page-level events
// when the decode node logged them (exact), else from the allocator replay
// (estimated, confidence scaled down), plus what findings name (aborted
// rooms, metadata rooms).
func (r *Runner) Reconstruct(ctx context.Context, d *Dataset) (*Reconstruction, error) {
	fs, err := LatestFindings(ctx, r.DB)
	if err != nil {
		return nil, err
	}
	rec, err := buildReconstruction(ctx, d, fs)
	if err != nil {
		return nil, err
	}
	rec.Created = r.now()
	rec.CaseID = r.CaseID
	if err := saveAffected(ctx, r.DB, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

func buildReconstruction(ctx context.Context, d *Dataset, fs []Finding) (*Reconstruction, error) {
	victims := map[string]*victim{}
	var ids []string
	for _, f := range fs {
		minSev, ok := VictimSeverity(f.Analyzer)
		if !ok || f.Severity.Rank() > minSev.Rank() || f.RequestKey == "" {
			continue
		}
		ids = append(ids, f.ID)
		v := victims[f.RequestKey]
		if v == nil {
			v = &victim{key: f.RequestKey, fact: d.ByKey[f.RequestKey], tenant: f.Tenant, room: f.Room, ts: f.TS,
				sources: map[string]*source{}}
			victims[f.RequestKey] = v
		}
		v.conf = max(v.conf, f.Confidence)
		v.findings = append(v.findings, f.ID)
		v.nodes = append(v.nodes, f.PrefillNode, f.DecodeNode)
		if f.Analyzer == "rejected_served" || f.Analyzer == "over_threshold" {
			v.placeholer = true
		}
		for _, k := range f.ForeignRequestKeys {
			if f.Analyzer == "transfer_mismatch" {
				continue // page lineage is added below with page counts
			}
			s := v.sources[k]
			if s == nil {
				s = &source{key: k}
				if sf := d.ByKey[k]; sf != nil {
					s.tenant, s.model, s.ts = sf.Tenant, sf.Model, sf.TS
					if sf.Decode != nil {
						s.node = sf.Decode.Node
					}
				}
				v.sources[k] = s
			}
			s.conf = max(s.conf, f.Confidence)
			s.findings = append(s.findings, f.ID)
		}
	}
	pr, err := d.Pages(ctx)
	if err != nil {
		return nil, err
	}
	placeholder, want := map[uint64]bool{}, map[uint64]bool{}
	for _, v := range victims {
		if v.room == 0 {
			continue
		}
		want[v.room] = true
		if v.placeholer {
			placeholder[v.room] = true
		}
	}
	var est map[uint64]*Estimate
	if len(want) > 0 {
		if est, _, err = estimateLineage(ctx, d, placeholder, nil, want); err != nil {
			return nil, err
		}
	}
	// Writer rooms -> requests (they may predate the window).
	lineage := map[uint64]map[uint64]int{} // victim room -> writer room -> pages
	exact := map[uint64]bool{}
	knownLineage := map[uint64]bool{}
	var writerRooms []uint64
	for _, v := range victims {
		if v.room == 0 {
			continue
		}
		var src map[uint64]int
		decodeNode := ""
		if v.fact != nil && v.fact.Decode != nil {
			decodeNode = v.fact.Decode.Node
		}
		switch {
		case pr != nil && pr.Nodes[decodeNode]:
			exact[v.room], knownLineage[v.room] = true, true
			if rd := pr.Reads[v.room]; rd != nil {
				src = rd.Stale
			}
		case est[v.room] != nil:
			src, knownLineage[v.room] = est[v.room].Sources, true
		}
		lineage[v.room] = src
		for w := range src {
			writerRooms = append(writerRooms, w)
		}
	}
	owners, err := roomOwners(ctx, d, writerRooms)
	if err != nil {
		return nil, err
	}
	for _, v := range victims {
		src := lineage[v.room]
		total := 0
		for _, n := range src {
			total += n
		}
		for w, n := range src {
			o := owners[w]
			if o == nil {
				o = &source{key: "room:" + itoa(w)}
			}
			s := v.sources[o.key]
			if s == nil {
				cp := *o
				s = &cp
				v.sources[o.key] = s
			}
			c := v.conf
			if !exact[v.room] {
				// Estimated lineage: a writer with a larger share is more
				// likely to have really been read.
				c *= 0.5 + 0.4*float64(n)/float64(max(total, 1))
			}
			s.conf = max(s.conf, c)
			s.findings = append(s.findings, v.findings...)
		}
	}

	type acc struct {
		row   AffectedRow
		reqs  map[string]bool
		finds map[string]bool
	}
	rows := map[string]*acc{}
	add := func(role domain.Role, tenant, key, model, node string, ts time.Time, conf float64, findings []string, nodes ...string) {
		if tenant == "" {
			return
		}
		k := string(role) + "\x00" + tenant
		a := rows[k]
		if a == nil {
			a = &acc{row: AffectedRow{Tenant: tenant, Role: role}, reqs: map[string]bool{}, finds: map[string]bool{}}
			rows[k] = a
		}
		if !a.reqs[key] {
			a.reqs[key] = true
			a.row.RequestKeys = append(a.row.RequestKeys, key)
		}
		for _, f := range findings {
			if !a.finds[f] {
				a.finds[f] = true
				a.row.FindingIDs = append(a.row.FindingIDs, f)
			}
		}
		if !ts.IsZero() && (a.row.First.IsZero() || ts.Before(a.row.First)) {
			a.row.First = ts
		}
		if ts.After(a.row.Last) {
			a.row.Last = ts
		}
		if model != "" {
			a.row.Models = append(a.row.Models, model)
		}
		a.row.Nodes = append(a.row.Nodes, node)
		a.row.Nodes = append(a.row.Nodes, nodes...)
		a.row.Confidence = max(a.row.Confidence, conf)
	}
	keys := make([]string, 0, len(victims))
	for k := range victims {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := victims[k]
		foreign := false
		known := (v.room != 0 && knownLineage[v.room]) || len(v.sources) > 0
		for _, s := range v.sources {
			if s.tenant != "" && s.tenant != v.tenant {
				foreign = true
				add(RoleExposed, s.tenant, s.key, s.model, s.node, s.ts, s.conf, s.findings)
			}
		}
		conf := v.conf
		if !known {
			// No lineage at all: assume foreign, at lower confidence.
			foreign, conf = true, v.conf*0.5
		}
		if !foreign {
			continue
		}
		model := ""
		if v.fact != nil {
			model = v.fact.Model
		}
		add(RoleReceived, v.tenant, v.key, model, "", v.ts, conf, v.findings, v.nodes...)
	}
	rec := &Reconstruction{}
	for _, a := range rows {
		a.row.Requests = len(a.row.RequestKeys)
		a.row.Models = uniqSortedStr(a.row.Models)
		a.row.Nodes = uniqSortedStr(a.row.Nodes)
		sort.Strings(a.row.RequestKeys)
		sort.Strings(a.row.FindingIDs)
		a.row.Confidence = clamp01(a.row.Confidence)
		rec.Rows = append(rec.Rows, a.row)
	}
	sort.Slice(rec.Rows, func(i, j int) bool {
		if rec.Rows[i].Role != rec.Rows[j].Role {
			return rec.Rows[i].Role.Rank() < rec.Rows[j].Role.Rank() // received first
		}
		return rec.Rows[i].Tenant < rec.Rows[j].Tenant
	})
	ids = uniqSortedStr(ids)
	h := sha256.Sum256([]byte(ReconstructionVersion + "\x00" + d.Window.String() + "\x00" + strings.Join(ids, ",")))
	rec.ID = hex.EncodeToString(h[:12])
	return rec, nil
}

const roomOwnersSQL = `SELECT bootstrap_room, request_id, tenant, model, ts_ns, decode_endpoint
FROM gateway_responses
WHERE has(?, bootstrap_room)`

// roomOwners maps writer rooms to their client requests (one bulk query;
// writers may predate the window).
func roomOwners(ctx context.Context, d *Dataset, rooms []uint64) (map[uint64]*source, error) {
	out := map[uint64]*source{}
	var missing []uint64
	for _, r := range uniqSortedU64(rooms) {
		if f := d.ByRoom[r]; f != nil && f.Tenant != "" {
			s := &source{key: f.Key, tenant: f.Tenant, model: f.Model, ts: f.TS}
			if f.Decode != nil {
				s.node = f.Decode.Node
			}
			out[r] = s
			continue
		}
		missing = append(missing, r)
	}
	if len(missing) == 0 {
		return out, nil
	}
	rows, err := d.DB.Query(ctx, roomOwnersSQL, missing)
	if err != nil {
		return nil, fmt.Errorf("owners of writer rooms: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var room, ns uint64
		var id, tenant, model, ep string
		if err := rows.Scan(&room, &id, &tenant, &model, &ns, &ep); err != nil {
			return nil, fmt.Errorf("scan room owner: %w", err)
		}
		out[room] = &source{key: id, tenant: tenant, model: model, ts: time.Unix(0, int64(ns)).UTC()}
	}
	return out, rows.Err()
}
