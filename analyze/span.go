package analyze

import "context"

// SpanAnalysis links a span of ingested requests by analyzing it: what
// `kvtrail ingest --analyze` does after its lines, in place of the link
// (Runner.Correlate). The run links every request once, saves it and
// records its rows as a link's (Run), so an incident ingested and then
// analyzed is linked once, where a link followed by `kvtrail analyze`
// linked every request twice. It is an ingest.Linker: the span is marked
// linked once the run has saved its requests.
type SpanAnalysis struct {
	Runner *Runner
	// Report is the run's, once Correlate has run (nil if it could not
	// load or store anything).
	Report *Report
}

// Correlate runs the analysis over w (the pending span widened by the link
// margin) and returns how many requests it linked. An analyzer's failure
// is in the Report, not an error: the requests are linked all the same.
func (a *SpanAnalysis) Correlate(ctx context.Context, w Window, _ int) (int, error) {
	rep, err := a.Runner.Run(ctx, w, nil)
	if rep == nil {
		return 0, err
	}
	a.Report = rep
	return rep.Linked, err
}
