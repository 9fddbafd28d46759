package analyze

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/kvtrail/kvtrail/internal/varbin"
)

// heldFindings are a run's victim findings, held from their analyzers'
// conclusions to the reconstruction, which stores them once it has
// filled in their foreign tenants (Runner.conclude). The reconstruction
// and the shared replay read only a finding's identity, request, times,
// nodes, evidence and foreign lists; those stay in fs. The rest (title,
// explanation, group, RIDs, details, subject) waits in a spill until the
// findings are stored. It grows with the victims: at incident-2026 scale
// 100, 74,416 victim findings (44 MB spilled), each with an explanation
// of 230-340 bytes, a title of 44-67 and a map of details, held through
// abort_reuse's replay and the reconstruction, the analysis's two
// highest phases.
type heldFindings struct {
	fs   []Finding   // the findings without their rest; may be reordered (withHeld)
	rest recordSpill // one record per finding held
	enc  []byte
}

// add holds fs.
func (h *heldFindings) add(fs []Finding) error {
	h.rest.name = "victim findings"
	for i := range fs {
		f := &fs[i]
		h.enc = encodeFindingRest(h.enc[:0], f)
		if err := h.rest.add(h.enc); err != nil {
			return err
		}
		lean := *f
		lean.Title, lean.Explanation, lean.GroupKey, lean.Subject = "", "", "", ""
		lean.RIDs, lean.Details = nil, nil
		h.fs = append(h.fs, lean)
	}
	return nil
}

// each calls fn with the held findings whole again (with whatever was
// changed in fs since), in the order they were added, in batches of at
// most n. fn must not keep a batch: the next one reuses it.
func (h *heldFindings) each(n int, fn func([]Finding) error) error {
	if h.rest.n != len(h.fs) {
		return fmt.Errorf("held victim findings: %d held, %d spilled", len(h.fs), h.rest.n)
	}
	at := make(map[string]int, len(h.fs))
	for i := range h.fs {
		at[h.fs[i].ID] = i
	}
	return inBatches(n, len(h.fs), func(put func(Finding) error) error {
		return h.rest.each(func(b []byte) error {
			var f Finding
			if err := decodeFindingRest(b, &f); err != nil {
				return err
			}
			i, ok := at[f.ID]
			if !ok {
				return fmt.Errorf("held victim findings: %s was spilled, not held", f.ID)
			}
			whole := h.fs[i]
			whole.Title, whole.Explanation, whole.GroupKey, whole.Subject = f.Title, f.Explanation, f.GroupKey, f.Subject
			whole.RIDs, whole.Details = f.RIDs, f.Details
			return put(whole)
		})
	}, fn)
}

// close drops the held findings.
func (h *heldFindings) close() {
	h.rest.close()
	*h = heldFindings{}
}

// encodeFindingRest appends f's id and what heldFindings spills of it:
// length-prefixed strings and counts, the details sorted by key.
func encodeFindingRest(b []byte, f *Finding) []byte {
	str := varbin.AppendString
	b = str(str(str(str(str(b, f.ID), f.Title), f.Explanation), f.GroupKey), f.Subject)
	b = binary.AppendUvarint(b, uint64(len(f.RIDs)))
	for _, r := range f.RIDs {
		b = str(b, r)
	}
	keys := make([]string, 0, len(f.Details))
	for k := range f.Details {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = str(str(b, k), f.Details[k])
	}
	return b
}

// decodeFindingRest reads what encodeFindingRest wrote into f. Empty
// lists and details come back nil.
func decodeFindingRest(b []byte, f *Finding) error {
	r := varbin.NewReader(b, errSpilled)
	f.ID, f.Title, f.Explanation, f.GroupKey, f.Subject = r.Str(), r.Str(), r.Str(), r.Str(), r.Str()
	if n := r.Count(1); n > 0 {
		f.RIDs = make([]string, n)
		for i := range f.RIDs {
			f.RIDs[i] = r.Str()
		}
	}
	if n := r.Count(2); n > 0 {
		f.Details = make(map[string]string, n)
		for range n {
			k := r.Str()
			f.Details[k] = r.Str()
		}
	}
	if r.Err == nil && r.Left() > 0 {
		return fmt.Errorf("%w: %d bytes left over in a victim finding", errSpilled, r.Left())
	}
	return r.Err
}
