package parse

// A parser hands out its payload structs (BatchStat, EngineEvent,
// GatewayResponse) and the pair lists of batch lines from blocks instead
// of allocating each one: a log is mostly lines of the same few kinds, and
// one allocation per block rather than per line is most of what a parsed
// line costs the allocator and the collector. Slots are handed out once
// and never reused, so a result stays valid for as long as it is kept; a
// block stays in memory while any of its slots does, which for ingest is
// one batch of rows.

// blockLen is how many values a block holds.
const blockLen = 64

type block[T any] struct{ free []T }

// next returns a pointer to a fresh zero T.
func (b *block[T]) next() *T {
	if len(b.free) == 0 {
		b.free = make([]T, blockLen)
	}
	p := &b.free[0]
	b.free = b.free[1:]
	return p
}

// take returns n fresh zero values; the slice's capacity ends at n, so
// appending to it cannot reach the next caller's values.
func (b *block[T]) take(n int) []T {
	if n > blockLen/2 {
		return make([]T, n)
	}
	if len(b.free) < n {
		b.free = make([]T, 4*blockLen)
	}
	out := b.free[:n:n]
	b.free = b.free[n:]
	return out
}

// arena is the blocks of one parser (parsers are per source and not
// concurrent). A nil *arena allocates every value on its own.
type arena struct {
	batches  block[BatchStat]
	events   block[EngineEvent]
	gateways block[GatewayResponse]
	strs     block[string]
}

func (a *arena) batch() *BatchStat {
	if a == nil {
		return new(BatchStat)
	}
	return a.batches.next()
}

func (a *arena) event() *EngineEvent {
	if a == nil {
		return new(EngineEvent)
	}
	return a.events.next()
}

func (a *arena) gateway() *GatewayResponse {
	if a == nil {
		return new(GatewayResponse)
	}
	return a.gateways.next()
}

func (a *arena) strings(n int) []string {
	if a == nil {
		return make([]string, n)
	}
	return a.strs.take(n)
}
