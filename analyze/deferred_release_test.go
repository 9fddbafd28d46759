package analyze

import (
	"bytes"
	"context"
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

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/simtest"
	"github.com/kvtrail/kvtrail/simulate"
)

// With SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE on, decode holds an
// aborted request's pages until every prefill rank acks the drain of its
// transfer, and after 30 s logs "Deferred KV release for room N timed out
// … releasing anyway." and frees them (decode.py resolve_deferred_releases
// ~L2405 at upstream d315eb72, sglang #35049; docs/sglang-log-formats.md
// §c4). The simulated abort race's decode logs get that line 30 s
// after every other abort. In a deployment known to run with deferred
// release on, abort_reuse then judges those aborts from the release:
// exactly the requests this test finds received on the abort's node and
// DP rank from the release to a window after it are its candidates, each
// citing the release line, the first ones MEDIUM; the aborts without the
// line stay LOW leads.
func TestDeferredReleaseTimeoutFromLogs(t *testing.T) {
	src, _ := simulated(t, simulate.Config{Scenario: "abort-race", Seed: 11, Scale: 0.25, DecodePool: 12_288})
	const hold = 30 * time.Second
	dir := simtest.Rewrite(t, src, t.TempDir(), deferredTimeouts(hold))
	aborts, recv := abortsFromLogs(t, dir)
	keys := map[uint64]string{}
	for _, g := range gatewayRooms(t, dir) {
		keys[g.Room] = g.ID
	}
	var timedOut int
	for _, a := range aborts {
		if a.released {
			timedOut++
		}
	}
	if timedOut == 0 || timedOut == len(aborts) {
		t.Fatalf("%d of %d aborts have a timed-out release: both kinds are needed", timedOut, len(aborts))
	}
	db := ingested(t, dir)
	// What the replay reads: each node's timed-out releases, by room.
	for _, node := range []string{"decode-0", "decode-1"} {
		got, err := db.DecodeReleaseTimeouts(context.Background(), time.Time{}, time.Now(), node)
		if err != nil {
			t.Fatal(err)
		}
		want := map[uint64]time.Time{}
		for _, a := range aborts {
			if a.node == node && a.released {
				want[a.room] = a.at.Add(hold)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d timed-out releases read, the log has %d", node, len(got), len(want))
		}
		for room, at := range want {
			if !got[room].Equal(at) {
				t.Errorf("%s, room %d: release read at %s, logged at %s", node, room, got[room], at)
			}
		}
	}
	// Whole, then in slices of 2,000 requests (a release may fall in the
	// slice after its abort's).
	cfg := DefaultConfig()
	cfg.DeferredRelease = "on"
	runWholeAndSliced(t, db, cfg, 2000, func(slice int, run *accuracy) {
		t.Run(fmt.Sprintf("slices of %d", slice), func(t *testing.T) {
			checkDeferredRelease(t, db, run, aborts, recv, keys, cfg.AbortReuseWindow, hold)
		})
	})
	t.Logf("%d aborts, %d with a timed-out release", len(aborts), timedOut)
}

// checkDeferredRelease compares one analysis's abort_reuse findings with
// what the logs show around each abort.
func checkDeferredRelease(t *testing.T, db *chstore.Store, run *accuracy, aborts []logAbort, recv map[laneKey][]logRecv, keys map[uint64]string, window, hold time.Duration) {

	byRoom := map[uint64][]Finding{}
	for _, x := range run.report.Runs {
		if x.Run.Analyzer != "abort_reuse" {
			continue
		}
		for _, f := range x.Findings {
			room, err := strconv.ParseUint(f.Details["aborted_room"], 10, 64)
			if err != nil {
				t.Fatalf("%s: aborted_room %q", f.Title, f.Details["aborted_room"])
			}
			byRoom[room] = append(byRoom[room], f)
		}
	}
	medium, ruledAll, queuedAll := 0, 0, 0
	for _, a := range aborts {
		fs := byRoom[a.room]
		if !a.released {
			for _, f := range fs {
				if f.Severity != Low || f.Details["deferred_release_timed_out_at"] != "" {
					t.Errorf("abort of room %d (no release line): %s %s, released %q: want a LOW lead",
						a.room, f.Severity, f.Title, f.Details["deferred_release_timed_out_at"])
				}
			}
			continue
		}
		rel := a.at.Add(hold)
		var want []uint64
		for _, r := range recv[laneKey{a.node, a.rank}] {
			// A request that never logged its Finish on decode waited in
			// the prealloc queue without pages (it timed out): no
			// candidate.
			if r.room != a.room && !r.at.Before(rel.Add(-secondSlack)) && !r.at.After(rel.Add(window)) && r.finished {
				want = append(want, r.room)
			}
		}
		// The candidates received from the release on, and the ones the
		// replay rules out (it frees the pages at the timeout, as decode
		// does), are the requests of the span; a candidate received
		// before it was waiting in the prealloc queue and is one only
		// because the replay hands it the pages at the release.
		recvAt := map[uint64]time.Time{}
		for _, r := range recv[laneKey{a.node, a.rank}] {
			recvAt[r.room] = r.at
		}
		var got []string
		ruledOut, queued := 0, 0
		for _, f := range fs {
			if strings.HasSuffix(f.Subject, "/abort/ruled-out") {
				var keys []string
				if err := json.Unmarshal([]byte(f.Details["ruled_out_requests"]), &keys); err != nil {
					t.Fatal(err)
				}
				n, _ := strconv.Atoi(f.Details["ruled_out"])
				if n != len(keys) {
					t.Fatalf("abort of room %d: %d ruled out, %d listed: the test lists too few to compare", a.room, n, len(keys))
				}
				got = append(got, keys...)
				ruledOut += n
				continue
			}
			if f.Details["deferred_release_timed_out_at"] != fmtTime(rel) {
				t.Errorf("abort of room %d, candidate %s: released at %q, want %s", a.room, f.RequestKey, f.Details["deferred_release_timed_out_at"], fmtTime(rel))
			}
			if !citesRelease(t, db, f.Evidence, a.room) {
				t.Errorf("abort of room %d, candidate %s: the evidence does not cite the release line", a.room, f.RequestKey)
			}
			if f.Severity == Medium {
				medium++
			}
			if strings.Contains(f.Explanation, " -") {
				t.Errorf("abort of room %d, candidate %s: a negative time in %q", a.room, f.RequestKey, f.Explanation)
			}
			if at, ok := recvAt[f.Room]; ok && at.Before(rel.Add(-secondSlack)) {
				queued++
				continue
			}
			got = append(got, f.RequestKey)
		}
		wantKeys := make([]string, 0, len(want))
		for _, room := range want {
			wantKeys = append(wantKeys, keys[room])
		}
		slices.Sort(wantKeys)
		slices.Sort(got)
		if !slices.Equal(got, wantKeys) {
			t.Errorf("abort of room %d on %s rank %d, released %s: candidates and ruled out %v, the logs show %v received from the release to %s after it",
				a.room, a.node, a.rank, fmtTime(rel), got, wantKeys, window)
		}
		ruledAll += ruledOut
		queuedAll += queued
	}
	t.Logf("timed-out releases: %d requests ruled out by the replay, %d candidates from the prealloc queue", ruledAll, queuedAll)
	t.Logf("%d MEDIUM candidates after a timed-out release", medium)
}

var (
	abortLineRe = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (DP(\d+)[^\]]*)\] Decode transfer failed for request .*bootstrap_room=(\d+) with exception KVTransferError\(bootstrap_room=\d+\): Aborted by AbortReq\.`)
	recvLineRe  = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\] (Receive|Finish): .*bootstrap_room=(\d+)`)
	dpSizeRe    = regexp.MustCompile(`\bdp_size=(\d+)`)
	lineTimeRe  = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)`)
)

const logTime = "2006-01-02 15:04:05"

// deferredTimeouts adds to the decode logs, for every other abort, the
// line SGLang logs when the deferred release of its pages times out,
// hold after it and in time order.
func deferredTimeouts(hold time.Duration) func(rel string, b []byte) ([]byte, error) {
	return func(rel string, b []byte) ([]byte, error) {
		if !strings.HasPrefix(rel, "decode-") || !strings.HasSuffix(rel, ".log") {
			return b, nil
		}
		lines := strings.SplitAfter(string(b), "\n")
		type added struct {
			at   time.Time
			line string
		}
		var adds []added
		n := 0
		for _, l := range lines {
			m := abortLineRe.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			n++
			if n%2 == 0 {
				continue
			}
			at, err := time.Parse(logTime, m[1])
			if err != nil {
				return nil, err
			}
			at = at.Add(hold)
			adds = append(adds, added{at, fmt.Sprintf("[%s %s] Deferred KV release for room %s timed out after %.1fs without a full drain ack from prefill; releasing anyway.\n",
				at.Format(logTime), m[2], m[4], hold.Seconds())})
		}
		var out bytes.Buffer
		for _, l := range lines {
			if m := lineTimeRe.FindStringSubmatch(l); m != nil {
				if at, err := time.Parse(logTime, m[1]); err == nil {
					for len(adds) > 0 && adds[0].at.Before(at) {
						out.WriteString(adds[0].line)
						adds = adds[1:]
					}
				}
			}
			out.WriteString(l)
		}
		for _, a := range adds {
			out.WriteString(a.line)
		}
		return out.Bytes(), nil
	}
}

type laneKey struct {
	node string
	rank int
}

type logAbort struct {
	node     string
	rank     int
	room     uint64
	at       time.Time
	released bool
}

type logRecv struct {
	room     uint64
	at       time.Time
	finished bool // decode logged its Finish
}

// abortsFromLogs reads the decode logs: each abort with whether its release
// timed out, and each request's Receive by node and DP rank. A decode
// node with load_balance_method='follow_bootstrap_room' takes a request on
// rank bootstrap_room % dp_size (docs/sglang-log-formats.md §e,
// common/conn.py); the test requires its server_args to say so. Times are
// the logs' plus the node's clock_offset in the manifest, as ingest reads
// them.
func abortsFromLogs(t *testing.T, dir string) ([]logAbort, map[laneKey][]logRecv) {
	t.Helper()
	srcs, err := ingest.LoadManifest(filepath.Join(dir, "sources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	offset := map[string]time.Duration{}
	for _, s := range srcs {
		if strings.HasSuffix(s.Path, ".log") {
			offset[s.Node] = s.ClockOffset
		}
	}
	var aborts []logAbort
	recv := map[laneKey][]logRecv{}
	for _, node := range []string{"decode-0", "decode-1"} {
		b, err := os.ReadFile(filepath.Join(dir, node+".log"))
		if err != nil {
			t.Fatal(err)
		}
		m := dpSizeRe.FindSubmatch(b)
		if m == nil || !bytes.Contains(b, []byte("load_balance_method='follow_bootstrap_room'")) {
			t.Fatalf("%s: its server_args do not say dp_size and follow_bootstrap_room", node)
		}
		dp, _ := strconv.ParseUint(string(m[1]), 10, 64)
		released, finished := map[uint64]bool{}, map[uint64]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			if _, rest, ok := strings.Cut(l, "] Deferred KV release for room "); ok {
				room, _ := strconv.ParseUint(strings.Fields(rest)[0], 10, 64)
				released[room] = true
			}
		}
		for _, l := range strings.Split(string(b), "\n") {
			if m := abortLineRe.FindStringSubmatch(l); m != nil {
				at, _ := time.Parse(logTime, m[1])
				rank, _ := strconv.Atoi(m[3])
				room, _ := strconv.ParseUint(m[4], 10, 64)
				aborts = append(aborts, logAbort{node: node, rank: rank, room: room, at: at.Add(offset[node]), released: released[room]})
			}
			if m := recvLineRe.FindStringSubmatch(l); m != nil {
				at, _ := time.Parse(logTime, m[1])
				room, _ := strconv.ParseUint(m[3], 10, 64)
				if m[2] == "Finish" {
					finished[room] = true
					continue
				}
				k := laneKey{node, int(room % dp)}
				recv[k] = append(recv[k], logRecv{room: room, at: at.Add(offset[node])})
			}
		}
		for k, rs := range recv {
			if k.node == node {
				for i := range rs {
					rs[i].finished = finished[rs[i].room]
				}
			}
		}
	}
	if len(aborts) == 0 {
		t.Fatal("no abort in the decode logs")
	}
	return aborts, recv
}

// citesRelease reports whether one of the evidence lines is room's release
// line.
func citesRelease(t *testing.T, db *chstore.Store, ids []uint64, room uint64) bool {
	t.Helper()
	var n uint64
	if err := db.QueryRow(context.Background(), "SELECT count() FROM raw_lines WHERE has(?, line_id) AND position(line, ?) > 0",
		ids, fmt.Sprintf("Deferred KV release for room %d ", room)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}
