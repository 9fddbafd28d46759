package analyze

import (
	"context"
	"fmt"
)

// MetadataCorruption reports "Context corruption detected" lines (decode
// read the metadata buffer slot of another bootstrap_room, §c4) and
// "Metadata unexpectedly not ready" lines, tied to both rooms. The check
// aborts the request with 500, so a caught collision served no data (LOW);
// a success for the same room despite the line is HIGH.
type MetadataCorruption struct{}

// Name implements Analyzer.
func (*MetadataCorruption) Name() string { return "metadata_corruption" }

func init() {
	Register(Registration{Order: 70,
		Victims: High,
		New: func(Config) Analyzer {
			return &MetadataCorruption{}
		}})
}

// Version implements Analyzer.
func (*MetadataCorruption) Version() string { return "1" }

// Params implements Analyzer.
func (*MetadataCorruption) Params() any { return struct{}{} }

// Analyze implements Analyzer.
func (*MetadataCorruption) Analyze(_ context.Context, d *Dataset) ([]Finding, error) {
	var out []Finding
	for _, t := range d.Transfer {
		if t.Event != "context_corruption" && t.Event != "metadata_not_ready" {
			continue
		}
		if !d.Window.Contains(t.TS) && d.ByRoom[t.Room] == nil {
			continue
		}
		fd := Finding{TS: t.TS, DecodeNode: t.Node, DecodeDPRank: t.DPRank, Room: t.Room, RIDs: []string{t.RID},
			Evidence: []uint64{t.Line}, Details: map[string]string{"event": t.Event, "metadata_index": fmt.Sprint(t.MetaIndex)},
			Subject: "line:" + itoa(t.Line), GroupKey: fmt.Sprintf("metadata:%s:%d", t.Node, t.DPRank)}
		victim := d.ByRoom[t.Room]
		if victim != nil {
			fd.RequestKey, fd.GatewayRequestID, fd.Tenant = victim.Key, victim.RequestID(), victim.Tenant
			fd.Evidence = append(fd.Evidence, victim.Lines()...)
			if victim.Prefill != nil {
				fd.PrefillNode = victim.Prefill.Node
			}
		}
		other := d.ByRoom[t.OtherRoom]
		if other != nil {
			fd.ForeignRequestKeys = []string{other.Key}
			if other.Tenant != "" && (victim == nil || other.Tenant != victim.Tenant) {
				fd.ForeignTenants = []string{other.Tenant}
			}
			fd.Evidence = append(fd.Evidence, other.Lines()...)
			fd.Details["other_room"] = itoa(t.OtherRoom)
		}
		served := victim != nil && victim.ClientSuccess()
		switch {
		case t.Event == "metadata_not_ready":
			fd.Severity, fd.Confidence = Note, 0.5
			fd.Title = fmt.Sprintf("metadata not ready on %s", t.Node)
		case served:
			fd.Severity, fd.Confidence = High, 0.9
			fd.Title = fmt.Sprintf("metadata corruption on %s and the client got a success", t.Node)
		default:
			fd.Severity, fd.Confidence = Low, 0.9
			fd.Title = fmt.Sprintf("metadata corruption caught on %s", t.Node)
		}
		outcome := "no gateway line for the room"
		if victim != nil && victim.GW != nil {
			outcome = fmt.Sprintf("client got %d with %s completion tokens", victim.GW.Status, commas(victim.GW.Completion))
		}
		otherT := "unknown request"
		if other != nil {
			otherT = fmt.Sprintf("request %s of tenant %s", other.Key, other.Tenant)
		}
		fd.Explanation = fmt.Sprintf("%s rank %d at %s: request %s (bootstrap_room %d) read the metadata buffer slot %d last filled for bootstrap_room %d (%s); %s.",
			t.Node, t.DPRank, fmtTime(t.TS), t.RID, t.Room, t.MetaIndex, t.OtherRoom, otherT, outcome)
		out = append(out, fd)
	}
	return out, nil
}
