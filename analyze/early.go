package analyze

import "context"

// Work that reads only the store and the window, not the linked requests,
// does not have to wait for the slices: Run starts it as the slices begin
// and collects it when it concludes. The completeness gaps (one grouped
// read of every raw line of the window: 1.2 s at 200k requests, 5.5 s at
// 2M) and posture_regression's reads of each node's boot and version lines
// (2 s and 5–8 s) ran alone before, the client idle while the server
// scanned. At 200k requests the first analysis went from 11.5 s to
// 9.8–10.5 s with this and the slimmer scans; at 2M the slices' client
// work already keeps two cores busy and the overlap saved nothing
// measurable (docs/performance.md, "Analysis speed").

// later is a value read in the background.
type later[T any] struct {
	done chan struct{}
	v    T
	err  error
}

// readLater starts f. Its result is read by wait; a caller that may not
// wait (an early return) cancels ctx and waits, so nothing outlives it.
func readLater[T any](ctx context.Context, f func(context.Context) (T, error)) *later[T] {
	l := &later[T]{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.v, l.err = f(ctx)
	}()
	return l
}

func (l *later[T]) wait() (T, error) {
	<-l.done
	return l.v, l.err
}

// earlyPass is a window pass whose work reads only the store and the
// window's bounds (posture_regression): Run starts it beside the slices
// (start); otherwise, as in an analysis worker's conclusion, finish runs it
// then, as a windowPass.
type earlyPass struct {
	run     windowPass
	started *later[[]Finding]
}

// starter is a pass Run can start before the slices.
type starter interface {
	start(ctx context.Context, d *Dataset)
	// wait waits for what start began, if anything.
	wait()
}

// start runs the pass on d, which holds only what prepare read (the store,
// the window, its watermark, the boots): the slices' Datasets are being
// built meanwhile.
func (p *earlyPass) start(ctx context.Context, d *Dataset) {
	p.started = readLater(ctx, func(ctx context.Context) ([]Finding, error) { return p.run(ctx, d) })
}

func (p *earlyPass) wait() {
	if p.started != nil {
		_, _ = p.started.wait()
	}
}

func (*earlyPass) slice(context.Context, *Dataset) ([]Finding, error) { return nil, nil }

func (p *earlyPass) finish(ctx context.Context, d *Dataset) ([]Finding, error) {
	if p.started == nil {
		return p.run(ctx, d)
	}
	return p.started.wait()
}

// early is the part of a prepared window an early pass may read.
func (d *Dataset) early() *Dataset {
	return &Dataset{DB: d.DB, Window: d.Window, Cfg: d.Cfg, Watermark: d.Watermark, Boots: d.Boots}
}
