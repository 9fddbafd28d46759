package analyze

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kvtrail/kvtrail/domain"
)

// An analysis saves every request it links to request_facts, and the
// reads after its slices (the reconstruction, the speed fit, requests
// named by findings) read those rows back. On the default path `kvtrail
// ingest` has just linked the same window and saved the same rows: the
// analysis wrote a second copy of every request, which the server then
// merged away (at scale 100, 9.9M rows; at scale 20 a quarter of the
// server's CPU during the analysis).
//
// So an analysis adopts the newest link's rows when it can prove they are
// the rows it would save: the link's window holds the run's and its
// requests all lie in the run's window; no line was ingested after the
// link began; every row it saved is still there (retention drops whole
// partitions) and no run has since saved rows of gateway-logged requests
// there (a newer row replaces the link's when the table merges). The
// run then saves only the requests the gateway did not log (the link
// leaves those to analyses) and adds the others to a digest, which must
// equal the link's (domain.FactDigest: the same rows, whatever their
// order). When it does, the run reads the rows saved at the link's
// version or later as its own (readVersion); when it does not (linked by
// another build or with other endpoints), the run saves the requests the
// gateway logged after its slices, linked again from their lines: what it
// would have saved, at the cost of a second link.
//
// A run that adopts nothing saves every request it links, and records the
// rows of gateway-logged ones in fact_links as a link would (Run; an
// analysis job's finisher records its slices' rows as one: finishJob): the
// next analysis of the window adopts them by the same proof. That is what lets
// `kvtrail ingest --analyze` (SpanAnalysis) analyze the span instead of
// linking it first, and a later `kvtrail analyze` still not save them again.

// adoption is a run's claim on a link's rows, checked as its slices go.
type adoption struct {
	link domain.FactLink
	got  domain.FactDigest
	buf  []byte
}

// adoptable returns the link whose rows the run over wd may take, or nil.
func (r *Runner) adoptable(ctx context.Context, wd *Dataset) (*adoption, error) {
	if r.NoAdopt {
		return nil, nil
	}
	link, ok, err := r.DB.LatestFactLink(ctx)
	if err != nil || !ok {
		return nil, err
	}
	w := wd.Window
	switch {
	case link.From.After(w.From) || link.To.Before(w.To):
		return nil, nil // the link did not see all of the window
	case link.Digest.N > 0 && (link.First.Before(w.From) || !w.Contains(link.Last)):
		return nil, nil // it saved requests outside the window
	case wd.Watermark.After(link.LinkedAt):
		return nil, nil // lines came in after it began
	}
	// Every row the link saved is still there, and none will be replaced.
	at, later, err := r.DB.LinkRows(ctx, link.Version, w.From, w.To)
	if err != nil || later > 0 || at != link.Digest.N {
		return nil, err
	}
	return &adoption{link: link}, nil
}

// take adds the requests of facts the gateway logged to the digest and
// returns the others, which the run saves itself.
func (a *adoption) take(facts []*Fact) []*Fact {
	var rest []*Fact
	for _, f := range facts {
		if f.GW == nil {
			rest = append(rest, f)
			continue
		}
		row := f.Row()
		a.buf = a.got.Add(&row, a.buf)
	}
	return rest
}

// settle ends the claim once the slices are done: the link's rows become
// the run's when the digests agree; otherwise the run saves the requests
// the gateway logged itself. It reports whether the rows were adopted.
func (r *Runner) settle(ctx context.Context, a *adoption, wd *Dataset) (bool, error) {
	if a.got == a.link.Digest {
		wd.adopted = a.link.Version
		return true, nil
	}
	if r.Log != nil {
		r.Log.Warn("the newest link's requests differ from this analysis's; saving them again",
			slog.Uint64("link_requests", a.link.Digest.N), slog.Uint64("requests", a.got.N))
	}
	if _, err := r.saveLinked(ctx, wd, 0, wd.factsVersion, nil); err != nil {
		return false, fmt.Errorf("save request facts: %w", err)
	}
	return false, nil
}

// readVersion is the oldest version of the request_facts rows that are the
// run's: its own, or the link's it adopted. Rows saved later are a later
// run's, as for any run; of several rows of one request the newest is
// read. At adoption no row of a gateway-logged request was newer than the
// link's, so those read are the link's rows, the run's own rows (requests
// the gateway did not log) and any a later run saves.
func (d *Dataset) readVersion() uint64 {
	if d.adopted != 0 {
		return d.adopted
	}
	return d.factsVersion
}

// sawLogged widens l's time span to the facts the gateway logged: the
// requests a link's digest counts (RequestFactsInsert).
func sawLogged(l *domain.FactLink, facts []*Fact) {
	for _, f := range facts {
		if f.GW != nil {
			l.Saw(f.TS)
		}
	}
}
