package analyze

import (
	"context"
	"fmt"
	"sort"
)

// TransferMismatch compares, per bootstrap room, the KV pages the prefill
// computed and sent with the pages decode reserved and read: from each
// side's prompt tokens and page size, or exactly from page-level events
// when the decode node logged them (a read of pages whose last write was
// for another room, or never happened).
type TransferMismatch struct{}

// Name implements Analyzer.
func (*TransferMismatch) Name() string { return "transfer_mismatch" }

func init() {
	Register(Registration{Order: 40,
		Victims: High,
		New: func(Config) Analyzer {
			return &TransferMismatch{}
		}})
}

// Version implements Analyzer.
func (*TransferMismatch) Version() string { return "1" }

// Params implements Analyzer.
func (*TransferMismatch) Params() any { return struct{}{} }

func pagesFor(tokens, pageSize uint64) uint64 {
	if pageSize == 0 {
		pageSize = 1
	}
	return (tokens + pageSize - 1) / pageSize
}

// Analyze implements Analyzer.
func (a *TransferMismatch) Analyze(ctx context.Context, d *Dataset) ([]Finding, error) {
	return runPass(ctx, a.newPass(), d)
}

// mismatchPass compares token counts request by request in each slice,
// and reads page events' verdicts once for the window.
type mismatchPass struct{}

func (*TransferMismatch) newPass() pass { return mismatchPass{} }

func (mismatchPass) slice(ctx context.Context, d *Dataset) ([]Finding, error) {
	pr, err := d.Pages(ctx)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, f := range d.Facts {
		if f.Unified || f.Prefill == nil || f.Decode == nil || f.Prefill.Fin == nil || f.Decode.Fin == nil {
			continue
		}
		if pr != nil && pr.Nodes[f.Decode.Node] {
			continue // exact lineage below
		}
		pps, dps := uint64(64), uint64(64)
		if b := f.Prefill.Boot; b != nil && b.PageSize > 0 {
			pps = b.PageSize
		}
		if b := f.Decode.Boot; b != nil && b.PageSize > 0 {
			dps = b.PageSize
		}
		// An aborted side transferred or read nothing by design.
		if f.Prefill.Fin.Aborted() && !f.Decode.Served() {
			continue
		}
		sent, reserved := pagesFor(f.Prefill.Fin.Prompt, pps), pagesFor(f.Decode.Fin.Prompt, dps)
		if sent == reserved || f.Decode.Fin.Prompt == 0 || f.Prefill.Fin.Prompt == 0 {
			continue
		}
		fd := f.Finding()
		fd.Severity, fd.Confidence = Low, 0.7
		if sent < reserved && f.Decode.Served() && f.ClientSuccess() {
			fd.Severity, fd.Confidence = High, 0.9
		}
		fd.Title = fmt.Sprintf("prefill sent %s pages, decode reserved %s", commas(sent), commas(reserved))
		fd.Explanation = fmt.Sprintf("bootstrap_room %d: prefill %s computed %s prompt tokens (%s pages of %d) while decode %s reserved and read %s prompt tokens (%s pages of %d): %s pages were never sent for this request; client got %d with %s completion tokens.",
			f.Room, f.Prefill.Node, commas(f.Prefill.Fin.Prompt), commas(sent), pps, f.Decode.Node, commas(f.Decode.Fin.Prompt),
			commas(reserved), dps, commas(reserved-min(sent, reserved)), f.Status(), commas(f.Completion()))
		fd.Details["pages_sent"] = itoa(sent)
		fd.Details["pages_reserved"] = itoa(reserved)
		fd.Details["method"] = "tokens"
		out = append(out, fd)
	}
	return out, nil
}

func (mismatchPass) finish(ctx context.Context, d *Dataset) ([]Finding, error) {
	pr, err := d.Pages(ctx)
	if err != nil || pr == nil {
		return nil, err
	}
	var out []Finding
	rooms := make([]uint64, 0, len(pr.Reads))
	named := []uint64{}
	for r, rd := range pr.Reads {
		rooms = append(rooms, r)
		named = append(named, r)
		for w := range rd.Stale {
			named = append(named, w)
		}
	}
	sort.Slice(rooms, func(i, j int) bool { return rooms[i] < rooms[j] })
	if err := d.ensureRequests(ctx, nil, named); err != nil {
		return nil, err
	}
	for _, room := range rooms {
		r := pr.Reads[room]
		f := d.requestIn(room)
		if f == nil || !d.Window.Contains(f.TS) {
			continue
		}
		fd := f.Finding()
		fd.DecodeNode, fd.DecodeDPRank = r.Node, r.Rank
		fd.Evidence = append(fd.Evidence, r.Lines...)
		stale := 0
		for w, n := range r.Stale {
			stale += n
			if src := d.requestIn(w); src != nil {
				fd.ForeignRequestKeys = append(fd.ForeignRequestKeys, src.Key)
				if src.Tenant != f.Tenant {
					fd.ForeignTenants = append(fd.ForeignTenants, src.Tenant)
				}
			} else {
				fd.ForeignRequestKeys = append(fd.ForeignRequestKeys, "room:"+itoa(w))
			}
		}
		fd.Severity, fd.Confidence = High, 1
		if !f.ClientSuccess {
			fd.Severity = Medium
		}
		fd.Title = fmt.Sprintf("decode read %s pages written by other rooms and %s never-written pages", commas(uint64(stale)), commas(uint64(r.Never)))
		fd.Explanation = fmt.Sprintf("page events on %s rank %d: bootstrap_room %d read %s pages; %s of them were last written by %d other rooms and %s were never written since boot; client got %d with %s completion tokens.",
			r.Node, r.Rank, room, commas(uint64(r.Pages)), commas(uint64(stale)), len(r.Stale), commas(uint64(r.Never)), f.Status, commas(f.Completion))
		fd.Details["method"] = "page_events"
		fd.Details["stale_pages"] = fmt.Sprint(stale)
		fd.Details["never_written_pages"] = fmt.Sprint(r.Never)
		fd.Subject = f.Key + "/pages"
		out = append(out, fd)
	}
	return out, nil
}
