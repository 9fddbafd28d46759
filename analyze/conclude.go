package analyze

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// emitter is a pass whose conclusion comes in parts (abort_reuse: one part
// per abort case). At 10M requests abort_reuse concludes with about half a
// million leads, and returning them as one list held them all, with their
// explanations, until they were stored: about 930 MB of the 2.1 GB peak of
// that analysis. The Runner stores each part as it comes instead
// (concludeRun).
type emitter interface {
	pass
	// emit is finish, handing its findings to out part by part; out's error
	// (a failed store) ends it.
	emit(ctx context.Context, d *Dataset, out func([]Finding) error) error
}

// onePart is a pass that concludes in one part: its finish is its emit.
type onePart struct{ pass }

func (p onePart) emit(ctx context.Context, d *Dataset, out func([]Finding) error) error {
	fs, err := p.finish(ctx, d)
	if err != nil {
		return err
	}
	return out(fs)
}

// emitterOf is p, concluding in parts when it can and in one otherwise.
func emitterOf(p pass) emitter {
	if e, ok := p.(emitter); ok {
		return e
	}
	return onePart{p}
}

// streamBatch is how many findings concludeRun stores at a time (a
// variable: tests make it small).
var streamBatch = 20_000

// concludeRun ends an analyzer's run over the window and records it: the
// slices' findings (early, read back in batches) and then each part its
// pass emits are finalized (finalizeNew: the first copy of an id wins, as
// in finalize), counted and stored in inserts of streamBatch. What hold
// names is not stored but added to held once the run has succeeded (the
// victims, which the reconstruction stores; they wait on local disk until
// then, not in the heap); the report keeps the findings, sorted by id as
// result sorts them, unless the Runner is Lean.
// The pass's failure, in a slice (failed) or at the end, ends in an ERROR
// run with no findings, as result records it (parts already stored belong
// to that run, which the current-findings rule never reads); a failed
// store is returned.
func (r *Runner) concludeRun(ctx context.Context, d *Dataset, a Analyzer, e emitter, early *findingSpill, failed error,
	took time.Duration, started time.Time, hold func(*Finding) bool, held *heldFindings) (RunResult, error) {
	if failed != nil {
		res := r.result(a, d, started, nil, failed, took)
		return res, r.DB.SaveRun(ctx, res.Run)
	}
	res := RunResult{Run: r.newRun(a, d, started)}
	known, err := r.DB.KnownFindingIDs(ctx, a.Name(), a.Version())
	if err != nil {
		return res, err
	}
	var (
		seen     = map[string]bool{}
		buf      []Finding
		pending  findingSpill // what hold names, until the run succeeds
		storeErr error
	)
	defer pending.close()
	pending.spill.name = "victim findings"
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		err := r.DB.SaveFindings(ctx, buf, r.now())
		buf = buf[:0]
		return err
	}
	add := func(fs []Finding) error {
		fs = finalizeNew(a, fs, seen)
		markCompleteness(d, fs)
		for _, f := range fs {
			f.RunID = res.Run.ID
			res.Run.Findings++
			if f.Severity == High {
				res.Run.High++
			}
			isNew := !known[f.ID]
			if isNew {
				res.NewCount++
			}
			if !r.Lean {
				res.Findings = append(res.Findings, f)
			}
			switch {
			case hold(&f):
				if err := pending.put(&f); err != nil {
					return err
				}
			case r.Live && !isNew:
			default:
				buf = append(buf, f)
			}
		}
		if len(buf) >= streamBatch {
			if err := flush(); err != nil {
				storeErr = fmt.Errorf("store %s findings: %w", a.Name(), err)
				return storeErr
			}
		}
		return nil
	}
	t0 := time.Now()
	err = early.each(streamBatch, add)
	if err == nil {
		err = e.emit(ctx, d, add)
	}
	if err == nil {
		err = flush()
		if err != nil {
			storeErr = fmt.Errorf("store %s findings: %w", a.Name(), err)
		}
	}
	res.Duration = took + time.Since(t0)
	res.Run.Finished = r.now()
	switch {
	case storeErr != nil:
		res.Run.Status, res.Run.Error = StatusError, storeErr.Error()
		return res, errors.Join(storeErr, r.DB.SaveRun(ctx, res.Run))
	case err != nil:
		// The pass failed: as result records it, no findings and no
		// victims.
		res.Run.Status, res.Run.Error = StatusError, err.Error()
		res.Run.Findings, res.Run.High, res.NewCount, res.Findings = 0, 0, 0, nil
		return res, r.DB.SaveRun(ctx, res.Run)
	}
	sort.Slice(res.Findings, func(i, j int) bool { return res.Findings[i].ID < res.Findings[j].ID })
	for _, f := range res.Findings {
		if !known[f.ID] {
			res.New = append(res.New, f)
		}
	}
	res.Run.Status = StatusSuccess
	if res.Run.Findings == 0 {
		res.Run.Status = StatusNoFindings
	}
	if err := r.DB.SaveRun(ctx, res.Run); err != nil {
		return res, err
	}
	return res, pending.each(streamBatch, held.add)
}
