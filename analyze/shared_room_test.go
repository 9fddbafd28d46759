package analyze

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// roomReq describes one request for TestSharedRoom: its tenant, room,
// nodes, and its prefill and decode spans in seconds from t0.
type roomReq struct {
	tenant         string
	room           uint64
	prefill        string
	pFrom, pTo     int
	decode         string
	dFrom, ttft    int
	status, tokens int
}

func (q roomReq) fact(i int) *Fact {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	line := uint64(10 * (i + 1))
	ev := func(s int, node, role, event string, n uint64) *EngineEvent {
		return &EngineEvent{TS: at(s), Node: node, Role: role, Event: event, Room: q.room, Line: line + n}
	}
	f := &Fact{Key: fmt.Sprintf("req-%d", i), TS: at(q.pFrom), Tenant: q.tenant, Room: q.room,
		GW: &GatewayResponse{TS: at(q.pFrom), RequestID: fmt.Sprintf("req-%d", i), Tenant: q.tenant, Status: uint16(q.status),
			Completion: uint64(q.tokens), TTFTMs: float64(q.ttft * 1000), Room: q.room, Line: line}}
	if q.prefill != "" {
		f.Prefill = &Side{Node: q.prefill, DPRank: -1, Recv: ev(q.pFrom, q.prefill, "prefill", "received", 1),
			Fin: ev(q.pTo, q.prefill, "prefill", "finished", 2)}
	}
	if q.decode != "" {
		f.Decode = &Side{Node: q.decode, DPRank: -1, Recv: ev(q.dFrom, q.decode, "decode", "received", 3),
			Fin: ev(q.dFrom+q.ttft+30, q.decode, "decode", "finished", 4)}
	}
	return f
}

// Requests in flight under one bootstrap room on one prefill or decode
// node are found, each naming the others; the same room at other times
// or on other nodes is not.
func TestSharedRoom(t *testing.T) {
	ok := func(tenant string, room uint64, p string, pFrom, pTo int, d string, dFrom, ttft int) roomReq {
		return roomReq{tenant, room, p, pFrom, pTo, d, dFrom, ttft, 200, 50}
	}
	type found struct {
		sev     Severity
		foreign []string // request keys
		tenants []string
		on      string
	}
	for _, tc := range []struct {
		name string
		reqs []roomReq
		keys []string         // the requests' keys, when not req-i
		want map[string]found // by request key
	}{
		{name: "distinct rooms", reqs: []roomReq{ok("a", 1, "p0", 0, 10, "d0", 1, 12), ok("b", 2, "p0", 0, 10, "d0", 1, 12)}},
		{name: "one room on one prefill node at once",
			reqs: []roomReq{ok("a", 7, "p0", 0, 10, "d0", 1, 12), ok("b", 7, "p0", 5, 15, "d1", 6, 12)},
			want: map[string]found{
				"req-0": {High, []string{"req-1"}, []string{"b"}, "prefill p0"},
				"req-1": {High, []string{"req-0"}, []string{"a"}, "prefill p0"},
			}},
		{name: "one room on one decode node at once",
			reqs: []roomReq{ok("a", 7, "p0", 0, 10, "d0", 1, 12), ok("a", 7, "p1", 2, 4, "d0", 3, 3)},
			want: map[string]found{
				"req-0": {High, []string{"req-1"}, nil, "decode d0"},
				"req-1": {High, []string{"req-0"}, nil, "decode d0"},
			}},
		{name: "one response logged twice", reqs: []roomReq{ok("a", 7, "p0", 0, 10, "d0", 1, 12), ok("a", 7, "p0", 0, 10, "d0", 1, 12)},
			keys: []string{"req-0", "req-0"}},
		{name: "one room one after the other", reqs: []roomReq{ok("a", 7, "p0", 0, 10, "d0", 1, 5), ok("b", 7, "p0", 10, 20, "d0", 11, 5)}},
		{name: "one room at once on other nodes", reqs: []roomReq{ok("a", 7, "p0", 0, 10, "d0", 1, 12), ok("b", 7, "p1", 0, 10, "d1", 1, 12)}},
		{name: "a request that served nothing is low",
			reqs: []roomReq{ok("a", 7, "p0", 0, 10, "d0", 1, 12), {"b", 7, "p0", 5, 15, "d1", 6, 12, 500, 0}},
			want: map[string]found{
				"req-0": {High, []string{"req-1"}, []string{"b"}, "prefill p0"},
				"req-1": {Low, []string{"req-0"}, []string{"a"}, "prefill p0"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := sharedRoomFindings(t, tc.reqs, tc.keys...)
			got := map[string]found{}
			for _, f := range fs {
				got[f.RequestKey] = found{f.Severity, f.ForeignRequestKeys, f.ForeignTenants, f.Details["shared_on"]}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("findings %v, want %v", got, tc.want)
			}
			for k, w := range tc.want {
				g := got[k]
				if g.sev != w.sev || !slices.Equal(g.foreign, w.foreign) || !slices.Equal(g.tenants, w.tenants) || g.on != w.on {
					t.Errorf("%s: %+v, want %+v", k, g, w)
				}
			}
		})
	}
}

// A room every concurrent request shares: each names at most
// sharedRoomPartners others and says there were more.
func TestSharedRoomBoundsItsPartners(t *testing.T) {
	var reqs []roomReq
	for i := 0; i < 3*sharedRoomPartners; i++ {
		reqs = append(reqs, roomReq{fmt.Sprintf("t%d", i%5), 42, "p0", i, i + 600, "d0", i + 1, 5, 200, 10})
	}
	fs := sharedRoomFindings(t, reqs)
	if len(fs) != len(reqs) {
		t.Fatalf("%d findings for %d requests under one room at once", len(fs), len(reqs))
	}
	for _, f := range fs {
		if len(f.ForeignRequestKeys) != sharedRoomPartners || f.Details["shared_with"] != fmt.Sprintf("more than %d", sharedRoomPartners) {
			t.Fatalf("%s names %d partners (%s)", f.RequestKey, len(f.ForeignRequestKeys), f.Details["shared_with"])
		}
	}
}

// sharedRoomFindings runs SharedRoom over reqs as one window, keyed by
// keys if given.
func sharedRoomFindings(t *testing.T, reqs []roomReq, keys ...string) []Finding {
	t.Helper()
	d := &Dataset{}
	for i, q := range reqs {
		f := q.fact(i)
		if keys != nil {
			f.Key = keys[i]
		}
		d.Facts = append(d.Facts, f)
	}
	fs, err := (&SharedRoom{}).Analyze(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fs {
		slices.Sort(fs[i].ForeignRequestKeys)
		slices.Sort(fs[i].ForeignTenants)
	}
	return fs
}
