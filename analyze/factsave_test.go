package analyze

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// recordingInserter builds "rows" (the facts' keys) when asked, and sends
// them when told to: each send blocks until the test releases it.
type recordingInserter struct {
	mu       sync.Mutex
	built    [][]string
	sent     [][]string
	inFlight int
	maxIn    int
	release  chan error
}

func (r *recordingInserter) RequestFactsInsert(facts []*Fact, _ uint64, _ *domain.FactDigest) func(context.Context) error {
	keys := make([]string, len(facts))
	for i, f := range facts {
		keys[i] = f.Key
	}
	r.mu.Lock()
	r.built = append(r.built, keys)
	r.mu.Unlock()
	return func(context.Context) error {
		r.mu.Lock()
		r.inFlight++
		r.maxIn = max(r.maxIn, r.inFlight)
		r.mu.Unlock()
		err := <-r.release
		r.mu.Lock()
		r.inFlight--
		if err == nil {
			r.sent = append(r.sent, keys)
		}
		r.mu.Unlock()
		return err
	}
}

func factsOf(keys ...string) []*Fact {
	out := make([]*Fact, len(keys))
	for i, k := range keys {
		out[i] = &Fact{Key: k}
	}
	return out
}

func TestFactSaverOverlapsOneInsertAndKeepsOrder(t *testing.T) {
	ins := &recordingInserter{release: make(chan error)}
	s := newFactSaver(context.Background(), ins, 1)
	if err := s.save(factsOf("a", "b")); err != nil {
		t.Fatal(err)
	}
	// The first insert is in flight and blocked; the second save builds its
	// rows at once, then waits for the first before it sends.
	second := make(chan error, 1)
	go func() { second <- s.save(factsOf("c")) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		ins.mu.Lock()
		built := len(ins.built)
		ins.mu.Unlock()
		if built == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second slice's rows were not built while the first insert was in flight")
		}
	}
	ins.release <- nil // first insert ends
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	ins.release <- nil // second insert ends
	if err := s.wait(); err != nil {
		t.Fatal(err)
	}
	if ins.maxIn != 1 {
		t.Errorf("%d inserts in flight at once, want 1", ins.maxIn)
	}
	if len(ins.sent) != 2 || ins.sent[0][0] != "a" || ins.sent[1][0] != "c" {
		t.Errorf("sent %v, want [a b] then [c]", ins.sent)
	}
}

func TestFactSaverReportsAFailedInsert(t *testing.T) {
	ins := &recordingInserter{release: make(chan error, 1)}
	s := newFactSaver(context.Background(), ins, 1)
	boom := errors.New("insert request_facts: boom")
	ins.release <- boom
	if err := s.save(factsOf("a")); err != nil {
		t.Fatalf("save returned %v before the insert ran", err)
	}
	// The next save reports the failure and sends nothing more.
	if err := s.save(factsOf("b")); !errors.Is(err, boom) {
		t.Fatalf("second save: %v, want %v", err, boom)
	}
	if err := s.wait(); !errors.Is(err, boom) {
		t.Fatalf("wait: %v, want %v", err, boom)
	}
	if len(ins.sent) != 0 {
		t.Errorf("sent %v after a failed insert", ins.sent)
	}
}
