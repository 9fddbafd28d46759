package analyze

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/simtest"
	"github.com/kvtrail/kvtrail/simulate"
)

// A deployment whose router gives requests shared bootstrap rooms, as a
// clean simulated day with its rooms rewritten: every room to one (a
// router deriving rooms from a request id clients leave unset), or each
// room to the room of the response before it when that came within two
// seconds (pairs, so a request's partners are a few, not the room's every
// tenant). The analysis links each request by its rids, and shared_room
// flags exactly the served requests that this test, reading the log lines
// itself, finds in flight beside another under the same room on the same
// prefill node (Receive to Finish) or decode node (Receive to the first
// token); the notification list names their tenants as having received
// foreign data, and their partners' tenants as possibly exposed.
func TestSharedRoomFromLogs(t *testing.T) {
	src, _ := simulated(t, simulate.Config{Scenario: "clean", Seed: 7, Scale: 0.2, Days: 1})
	for _, tc := range []struct {
		name string
		edit func(rel string, b []byte) ([]byte, error)
	}{
		{"one room", simtest.OneRoom},
		{"pairs", pairedRooms(t, src, 2*time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := simtest.Rewrite(t, src, t.TempDir(), tc.edit)
			want, tenants, exposed := sharedFromLogs(t, dir)
			if len(want) == 0 {
				t.Fatal("no two requests in flight under one room on a node: the comparison proves nothing")
			}
			db := ingested(t, dir)
			// Whole, then in slices of 2,000 requests (a request's partners
			// may lie in the slice's context).
			runWholeAndSliced(t, db, DefaultConfig(), 2000, func(slice int, a *accuracy) {
				got := map[string]bool{}
				for _, x := range a.report.Runs {
					if x.Run.Analyzer != "shared_room" {
						continue
					}
					for _, f := range x.Findings {
						if f.Severity == High {
							got[f.GatewayRequestID] = true
						}
					}
				}
				if g, w := keysOf(got), keysOf(want); !slices.Equal(g, w) {
					t.Errorf("slices of %d: shared_room HIGH on %d requests, the logs show %d served beside another", slice, len(g), len(w))
					for _, k := range w {
						if !got[k] {
							t.Errorf("missed %s", k)
						}
					}
					for _, k := range g {
						if !want[k] {
							t.Errorf("flagged %s", k)
						}
					}
				}
				if g := keysOf(a.received); !slices.Equal(g, tenants) {
					t.Errorf("slices of %d: tenants that received foreign data %v, want %v", slice, g, tenants)
				}
				if g := keysOf(a.exposed); !slices.Equal(g, exposed) {
					t.Errorf("slices of %d: tenants possibly exposed %v, want %v", slice, g, exposed)
				}
			})
			t.Logf("%d requests served under a shared room at once; received %v, exposed %v", len(want), tenants, exposed)
		})
	}
}

// gatewayRoom is a gateway response of a simulated incident with a room.
type gatewayRoom struct {
	TS   time.Time `json:"ts"`
	ID   string    `json:"request_id"`
	Room uint64    `json:"bootstrap_room"`
}

// gatewayRooms reads the responses with a room from dir's gateway logs.
func gatewayRooms(t *testing.T, dir string) []gatewayRoom {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "gateway-*.jsonl"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("gateway logs of %s: %v", dir, err)
	}
	var out []gatewayRoom
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			var g gatewayRoom
			if json.Unmarshal(l, &g) == nil && g.Room != 0 {
				out = append(out, g)
			}
		}
	}
	return out
}

// pairedRooms is an edit that gives each gateway response of src whose
// previous response (by time, over every gateway log) came within gap,
// and has not itself been given another's, that response's room, in
// every log.
func pairedRooms(t *testing.T, src string, gap time.Duration) func(string, []byte) ([]byte, error) {
	t.Helper()
	rs := gatewayRooms(t, src)
	slices.SortFunc(rs, func(a, b gatewayRoom) int { return a.TS.Compare(b.TS) })
	to := map[string]string{}
	for i := 1; i < len(rs); i++ {
		prev := strconv.FormatUint(rs[i-1].Room, 10)
		if _, taken := to[prev]; !taken && rs[i].TS.Sub(rs[i-1].TS) <= gap {
			to[strconv.FormatUint(rs[i].Room, 10)] = prev
		}
	}
	room := regexp.MustCompile(`(bootstrap_room(?:": ?|=))([0-9]+)`)
	return func(_ string, b []byte) ([]byte, error) {
		return room.ReplaceAllFunc(b, func(m []byte) []byte {
			sm := room.FindSubmatch(m)
			if r, ok := to[string(sm[2])]; ok {
				return append(slices.Clip(sm[1]), r...)
			}
			return m
		}), nil
	}
}

// sharedFromLogs reads dir's gateway and engine logs with regular
// expressions of its own and returns the served PD requests (by gateway
// request id) in flight under their room beside another request on the
// same prefill or decode node, the tenants of those beside a request of
// another tenant, and the tenants of those other requests.
func sharedFromLogs(t *testing.T, dir string) (map[string]bool, []string, []string) {
	t.Helper()
	type req struct {
		id, tenant, prid, drid string
		room                   uint64
		served                 bool
		ttft                   time.Duration
	}
	var reqs []req
	line := regexp.MustCompile(`^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)[^\]]*\] (Receive|Finish): obj=GenerateReqInput\(.*?\brid='([^']+)'`)
	type span struct{ from, to time.Time }
	type at struct {
		node string
		t    time.Time
	}
	recv, fin := map[string]at{}, map[string]time.Time{} // by rid
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			switch {
			case strings.HasPrefix(name, "gateway-"):
				var g struct {
					ID         string  `json:"request_id"`
					Tenant     string  `json:"tenant"`
					Status     int     `json:"status"`
					Completion int     `json:"completion_tokens"`
					TTFT       float64 `json:"ttft_ms"`
					PRID       string  `json:"prefill_rid"`
					DRID       string  `json:"decode_rid"`
					Room       uint64  `json:"bootstrap_room"`
				}
				// Requests served by a unified engine (mode regular) have
				// no room.
				if json.Unmarshal(sc.Bytes(), &g) == nil && g.ID != "" && g.Room != 0 {
					reqs = append(reqs, req{g.ID, g.Tenant, g.PRID, g.DRID, g.Room, g.Status == 200 && g.Completion > 0,
						time.Duration(g.TTFT * float64(time.Millisecond))})
				}
			case strings.HasSuffix(name, ".log"):
				m := line.FindStringSubmatch(sc.Text())
				if m == nil {
					continue
				}
				ts, err := time.Parse("2006-01-02 15:04:05.999999999", m[1])
				if err != nil {
					t.Fatal(err)
				}
				if m[2] == "Receive" {
					recv[m[3]] = at{strings.TrimSuffix(name, ".log"), ts}
				} else {
					fin[m[3]] = ts
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Each request's span on its prefill and its decode node.
	spans := map[string][]struct {
		r    int
		span span
	}{}
	for i, q := range reqs {
		if p, ok := recv[q.prid]; ok {
			if end, ok := fin[q.prid]; ok {
				k := fmt.Sprintf("p:%s/%d", p.node, q.room)
				spans[k] = append(spans[k], struct {
					r    int
					span span
				}{i, span{p.t, end}})
			}
		}
		if d, ok := recv[q.drid]; ok && q.ttft > 0 {
			k := fmt.Sprintf("d:%s/%d", d.node, q.room)
			spans[k] = append(spans[k], struct {
				r    int
				span span
			}{i, span{d.t, d.t.Add(q.ttft)}})
		}
	}
	want, foreign, exposed := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, l := range spans {
		for _, a := range l {
			for _, b := range l {
				if a.r == b.r || !a.span.from.Before(b.span.to) || !b.span.from.Before(a.span.to) || !reqs[a.r].served {
					continue
				}
				want[reqs[a.r].id] = true
				if reqs[b.r].tenant != reqs[a.r].tenant {
					foreign[reqs[a.r].tenant] = true
					exposed[reqs[b.r].tenant] = true
				}
			}
		}
	}
	return want, keysOf(foreign), keysOf(exposed)
}
