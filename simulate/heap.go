package simulate

type evKind uint8

const (
	evSource evKind = iota
	evArrive
	evPRecv
	evDRecv
	evDAllocRetry
	evPStart
	evPDone
	evLand
	evFirst
	evFinish
	evCancel
	evAbort
	evTimeout
	evUFinish
	evDown
	evBoot
	evReady
	evTick
	evScrape
	evRetract
	evResume
)

// event is one scheduled step. seq breaks ties in insertion order so the
// processing order, and therefore every RNG draw, is deterministic.
type event struct {
	at   int64
	seq  uint64
	kind evKind
	rank int32
	aux  int32
	r    *request
	n    *node
}

// eventHeap is a binary min-heap on (at, seq), hand-rolled to avoid
// container/heap's interface boxing on the hot path.
type eventHeap struct {
	ev  []event
	ctr uint64
}

func (h *eventHeap) less(i, j int) bool {
	a, b := &h.ev[i], &h.ev[j]
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (h *eventHeap) push(e event) {
	h.ctr++
	e.seq = h.ctr
	h.ev = append(h.ev, e)
	i := len(h.ev) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.ev[i], h.ev[p] = h.ev[p], h.ev[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	top := h.ev[0]
	last := len(h.ev) - 1
	h.ev[0] = h.ev[last]
	h.ev[last] = event{}
	h.ev = h.ev[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		m := l
		if r := l + 1; r < last && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.ev[i], h.ev[m] = h.ev[m], h.ev[i]
		i = m
	}
	return top
}

func (h *eventHeap) len() int { return len(h.ev) }
