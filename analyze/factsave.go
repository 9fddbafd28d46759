package analyze

import (
	"context"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// factSaver saves a run's linked requests to request_facts in the
// background, one slice's insert at a time, while the run goes on with the
// slice's passes and reads and links the next slice. Saving was a step of
// its own between linking and the passes (at scale 100, 555 s of a 2,787 s
// analysis, the server busy and the client idle); on a 2-core machine the
// server's insert and the client's linking now overlap instead of taking
// turns.
//
// Only the built rows wait (Results.RequestFactsInsert builds them before
// it returns), not the slice's linked requests, and at most one insert is
// in flight: save waits for the previous one before it starts the next.
// Nothing reads a run's facts back before its slices are done (the reads
// by version are the conclusions' and the reconstruction's), and Run waits
// for the last insert before it concludes.
type factSaver struct {
	ctx     context.Context
	db      factInserter
	version uint64
	done    chan struct{} // closed when the insert in flight ends; nil when none is
	err     error         // the first insert's error, set before done closes
	// waited is how long the run waited for inserts: the part of saving
	// that did not overlap with anything.
	waited time.Duration
	// digest, when set, gets the rows saved of requests the gateway logged
	// (a link's record of what it saved, domain.FactLink).
	digest *domain.FactDigest
}

// factInserter is the part of Results a factSaver uses.
type factInserter interface {
	RequestFactsInsert(facts []*Fact, version uint64, dg *domain.FactDigest) func(context.Context) error
}

func newFactSaver(ctx context.Context, db factInserter, version uint64) *factSaver {
	return &factSaver{ctx: ctx, db: db, version: version}
}

// save starts saving facts once the previous insert has ended, and
// reports that insert's error (or any earlier one).
func (s *factSaver) save(facts []*Fact) error {
	send := s.db.RequestFactsInsert(facts, s.version, s.digest)
	if err := s.wait(); err != nil {
		return err
	}
	done := make(chan struct{})
	s.done = done
	go func() {
		defer close(done)
		s.err = send(s.ctx)
	}()
	return nil
}

// wait waits for the insert in flight and returns the first error of any.
func (s *factSaver) wait() error {
	if s.done != nil {
		t0 := time.Now()
		<-s.done
		s.waited += time.Since(t0)
		s.done = nil
	}
	return s.err
}
