package analyze

// heldFindings are a run's victim findings, held from their analyzers'
// conclusions to the reconstruction, which stores them once it has
// filled in their foreign tenants (Runner.conclude). They wait whole in a
// spill on local disk; what stays in the heap is, per victim request,
// the room the shared allocator replay is asked about (rooms). At
// incident-2026 scale 100 the 74,235 victim findings were 45 MiB of the
// heap through abort_reuse's replay, the analysis's highest phase, as
// structs without their text (the text, 44 MB, was spilled already); the
// rooms of their 18,777 victim requests were 5.7 MB in a heap profile.
type heldFindings struct {
	findings findingSpill
	rooms    victimRooms
}

// add holds fs.
func (h *heldFindings) add(fs []Finding) error {
	h.findings.spill.name = "victim findings"
	for i := range fs {
		h.rooms.add(&fs[i])
	}
	return h.findings.add(fs)
}

// len is how many findings are held.
func (h *heldFindings) len() int { return h.findings.spill.n }

// each calls fn with the held findings whole, in the order they were
// added, in batches of at most n. fn must not keep a batch: the next one
// reuses it.
func (h *heldFindings) each(n int, fn func([]Finding) error) error {
	return h.findings.each(n, fn)
}

// close drops the held findings.
func (h *heldFindings) close() {
	h.findings.close()
	*h = heldFindings{}
}
