package analyze

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// The allocator replay of a job shared among its workers. The worker that
// concludes a job (worker.go) meets the replay inside its conclusion, when
// abort_reuse and the reconstruction ask about rooms. It writes the ask to
// replay_parts, with one unit per decode node; every worker of the job
// (the concluding one too) claims nodes through the job's Claims, replays
// each claimed node and writes that node's answer in one INSERT before
// marking the unit done. A worker that dies holding a node leaves it
// claimed until its lease runs out; another takes it over. Once every node
// is done, the concluding worker reads the answers back, in node order,
// and goes on as if it had replayed them itself: a node's answer depends
// only on the ask and that node's lines (replay_stream.go), so the result
// equals a single process's (TestWorkersShareTheReplay).

// ReplayStore is where a job's workers leave its shared replay.
type ReplayStore interface {
	SaveReplayPart(ctx context.Context, p domain.ReplayPart) error
	// ReplayAsks streams the job's asks with an id after after, in order.
	ReplayAsks(ctx context.Context, job, after string, fn func(domain.ReplayPart) error) error
	// ReplayAnswers streams the answers to one ask, by unit.
	ReplayAnswers(ctx context.Context, job, ask string, fn func(domain.ReplayPart) error) error
}

// JobStore is what a job's workers leave for each other.
type JobStore interface {
	SliceStore
	ReplayStore
}

// askRecord is a replayJob as JSON (rooms as sorted lists).
type askRecord struct {
	From        int64    `json:"from_ns"`
	To          int64    `json:"to_ns"`
	Nodes       []string `json:"nodes"`
	Placeholder []uint64 `json:"placeholder,omitempty"`
	Writers     []uint64 `json:"writers,omitempty"`
	Holders     []uint64 `json:"holders,omitempty"`
	Of          []uint64 `json:"of,omitempty"`
}

// answerRecord is one node's replayAnswer as JSON.
type answerRecord struct {
	Lineage map[uint64]*VictimReplay `json:"lineage,omitempty"`
	Held    map[uint64][]uint64      `json:"held,omitempty"`
}

func roomList(m map[uint64]bool) []uint64 {
	out := make([]uint64, 0, len(m))
	for r, ok := range m {
		if ok {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

func roomSet(l []uint64) map[uint64]bool {
	m := make(map[uint64]bool, len(l))
	for _, r := range l {
		m[r] = true
	}
	return m
}

func encodeAsk(j replayJob) (string, error) {
	b, err := json.Marshal(askRecord{From: j.from.UnixNano(), To: j.to.UnixNano(), Nodes: j.nodes,
		Placeholder: roomList(j.placeholder), Writers: roomList(j.ask.writers), Holders: j.ask.holders,
		Of: roomList(j.ask.of)})
	return string(b), err
}

func decodeAsk(data string) (replayJob, error) {
	var a askRecord
	if err := json.Unmarshal([]byte(data), &a); err != nil {
		return replayJob{}, fmt.Errorf("replay ask: %w", err)
	}
	return replayJob{from: time.Unix(0, a.From).UTC(), to: time.Unix(0, a.To).UTC(), nodes: a.Nodes,
		placeholder: roomSet(a.Placeholder),
		ask:         &replayAsk{writers: roomSet(a.Writers), holders: roomsOf(a.Holders), of: roomSet(a.Of)}}, nil
}

// jobReplay is one worker's side of a job's shared replays.
type jobReplay struct {
	r      *Runner
	d      *Dataset // the worker's window
	job    Job
	claims Claims
	store  ReplayStore
	seq    int
}

// sharedAsk is an ask as the workers run it: its id and one unit per node.
type sharedAsk struct {
	id    string
	j     replayJob
	units []string
}

func newSharedAsk(id string, j replayJob) *sharedAsk {
	a := &sharedAsk{id: id, j: j, units: make([]string, len(j.nodes))}
	for i := range j.nodes {
		a.units[i] = fmt.Sprintf("replay/%s/%05d", id, i)
	}
	return a
}

// run is the concluding worker's replayer: it writes the ask, replays the
// nodes it can claim while the other workers replay theirs, waits for
// every node and reads the answers back in node order.
func (jr *jobReplay) run(ctx context.Context, j replayJob) ([]replayAnswer, error) {
	jr.seq++
	// Ids sort in the order asks are written, also across a worker that
	// took the conclusion over from a dead one.
	id := fmt.Sprintf("%020d-%s-%d", time.Now().UnixNano(), jr.job.Worker, jr.seq)
	data, err := encodeAsk(j)
	if err != nil {
		return nil, err
	}
	if err := jr.store.SaveReplayPart(ctx, domain.ReplayPart{Job: jr.job.ID, Ask: id, Worker: jr.job.Worker, Kind: "ask", Data: data}); err != nil {
		return nil, err
	}
	a := newSharedAsk(id, j)
	for {
		done, err := jr.work(ctx, a)
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
		if err := sleep(ctx, jr.job.Poll); err != nil {
			return nil, err
		}
	}
	return jr.answers(ctx, a)
}

// answerReads is how many times answers reads a done ask's answers before
// it gives up on a missing one: on a cluster, a node's answer is written
// through one replica and may reach the one read a moment later.
const answerReads = 50

// answers reads the answers to a, whose nodes are all done, in node order.
func (jr *jobReplay) answers(ctx context.Context, a *sharedAsk) ([]replayAnswer, error) {
	res := make([]replayAnswer, len(a.units))
	got := make([]bool, len(a.units))
	byUnit := map[string]int{}
	for i, u := range a.units {
		byUnit[u] = i
	}
	for range answerReads {
		err := jr.store.ReplayAnswers(ctx, jr.job.ID, a.id, func(p domain.ReplayPart) error {
			i, ok := byUnit[p.Unit]
			if !ok || got[i] {
				return nil // a node redone after its worker died: one answer is enough
			}
			var rec answerRecord
			if err := json.Unmarshal([]byte(p.Data), &rec); err != nil {
				return fmt.Errorf("replay answer for %s from %s: %w", a.j.nodes[i], p.Worker, err)
			}
			res[i], got[i] = replayAnswer{lineage: rec.Lineage, held: rec.Held}, true
			return a.j.spill(i, &res[i])
		})
		if err != nil {
			return nil, err
		}
		missing := slices.Index(got, false)
		if missing < 0 {
			return res, nil
		}
		if err := sleep(ctx, jr.job.Poll); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("replay ask %s: node %s is done but its answer was not found", a.id, a.j.nodes[slices.Index(got, false)])
}

// work replays the nodes of a it can claim, Config.ReplayWorkers at once,
// writing each node's answer before its unit is done. It claims a node
// only when it has a free replay worker, so the job's other workers can
// claim the rest. It reports whether every node of a is done (by any
// worker).
func (jr *jobReplay) work(ctx context.Context, a *sharedAsk) (bool, error) {
	err := eachAtOnce(ctx, len(a.units), jr.d.Cfg.ReplayWorkers, func(ctx context.Context, i int) error {
		lease, err := jr.claims.Claim(ctx, jr.job.ID, a.units[i])
		if err != nil || lease == nil {
			return err
		}
		return jr.node(ctx, a, i, lease)
	})
	if err != nil {
		return false, fmt.Errorf("replay ask %s: %w", a.id, err)
	}
	left, err := jr.claims.Remaining(ctx, jr.job.ID, a.units)
	return len(left) == 0, err
}

// node replays node i of a under lease and writes its answer.
func (jr *jobReplay) node(ctx context.Context, a *sharedAsk, i int, lease Lease) error {
	stop := renewing(ctx, lease, jr.job.Lease, jr.r.Log)
	defer stop()
	ans, err := jr.d.replayNode(ctx, a.j, i, nil) // the answer goes to the other workers whole
	if err != nil {
		return err
	}
	b, err := json.Marshal(answerRecord{Lineage: ans.lineage, Held: ans.held})
	if err != nil {
		return err
	}
	if err := jr.store.SaveReplayPart(ctx, domain.ReplayPart{Job: jr.job.ID, Ask: a.id, Unit: a.units[i],
		Worker: jr.job.Worker, Kind: "answer", Data: string(b)}); err != nil {
		return err
	}
	return lease.Done(ctx)
}

// help is what a worker does once no slice is left and another worker
// concludes: it replays the nodes of the job's asks that it can claim,
// until the job is finished. When the concluding worker dies, its lease on
// the conclusion runs out and help returns the conclusion's lease: this
// worker concludes instead. It returns nil when the job is finished.
func (jr *jobReplay) help(ctx context.Context) (Lease, error) {
	var (
		last   string
		active []*sharedAsk
	)
	for {
		lease, err := jr.claims.Claim(ctx, jr.job.ID, "finish")
		if err != nil || lease != nil {
			return lease, err
		}
		left, err := jr.claims.Remaining(ctx, jr.job.ID, []string{"finish"})
		if err != nil {
			return nil, err
		}
		if len(left) == 0 {
			return nil, nil
		}
		err = jr.store.ReplayAsks(ctx, jr.job.ID, last, func(p domain.ReplayPart) error {
			j, err := decodeAsk(p.Data)
			if err != nil {
				return fmt.Errorf("%s: %w", p.Ask, err)
			}
			active, last = append(active, newSharedAsk(p.Ask, j)), p.Ask
			return nil
		})
		if err != nil {
			return nil, err
		}
		for k := 0; k < len(active); k++ {
			done, err := jr.work(ctx, active[k])
			if err != nil {
				return nil, err
			}
			if done {
				active = slices.Delete(active, k, k+1)
				k--
			}
		}
		if err := sleep(ctx, jr.job.Poll); err != nil {
			return nil, err
		}
	}
}
