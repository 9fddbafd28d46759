package simulate

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestTruthConsistentWithLogs checks truth.json against the files a
// deployment would have: gateway lines, prefill request logs, startup limits
// and, with page events, exact page lineage.
func TestTruthConsistentWithLogs(t *testing.T) {
	dir := runScenario(t, "mixed", 3, 0.25, true)
	tr, err := LoadTruth(filepath.Join(dir, "truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	classes := map[string]int{}
	for _, a := range tr.Affected {
		classes[a.Class]++
	}
	// Abort reuse needs a merge of release_pages between the abort and the
	// late write (need_sort); at this pool size it is rare, so only the
	// placeholder class is required here.
	for _, c := range []string{ClassRejectedPlaceholder} {
		if classes[c] == 0 {
			t.Errorf("no %s victims in mixed (classes %v)", c, classes)
		}
	}

	gw := map[string]map[string]any{}
	for _, p := range []string{"gateway-0.jsonl", "gateway-1.jsonl"} {
		forLines(t, filepath.Join(dir, p), func(_ int, l string) {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatal(err)
			}
			gw[m["request_id"].(string)] = m
		})
	}
	// Pools logged at boot, per node.
	limitsRe := regexp.MustCompile(`max_total_num_tokens=(\d+), .*context_len=(\d+)`)
	pools := map[string]map[int]int{}
	finishPrompt := map[string]int{} // prefill rid -> prompt_tokens in its Finish line
	finishRe := regexp.MustCompile(`Finish: obj=GenerateReqInput\(.*rid='([0-9a-f]{32})'.*'prompt_tokens': (\d+),`)
	for _, n := range tr.Nodes {
		if pools[n.Node] != nil || n.Role != "prefill" {
			continue
		}
		pools[n.Node] = map[int]int{}
		forLines(t, filepath.Join(dir, n.Node+".log"), func(_ int, l string) {
			if m := limitsRe.FindStringSubmatch(l); m != nil {
				p, _ := strconv.Atoi(m[1])
				c, _ := strconv.Atoi(m[2])
				pools[n.Node][p] = c
			}
			if m := finishRe.FindStringSubmatch(l); m != nil {
				v, _ := strconv.Atoi(m[2])
				finishPrompt[m[1]] = v
			}
		})
	}
	for _, a := range tr.Affected {
		g := gw[a.RequestID]
		if g == nil {
			t.Errorf("%s: no gateway line", a.RequestID)
			continue
		}
		if int(g["status"].(float64)) != 200 {
			t.Errorf("%s: gateway status %v, want 200 (victims are served)", a.RequestID, g["status"])
		}
		if int(g["prompt_tokens"].(float64)) != a.PromptTokens {
			t.Errorf("%s: gateway prompt_tokens %v != truth %d", a.RequestID, g["prompt_tokens"], a.PromptTokens)
		}
		if a.Class != ClassRejectedPlaceholder {
			continue
		}
		if a.PromptTokens < a.PrefillLimit || a.PrefillLimit != maxReqInputLen(a.PrefillPool, contextLen) {
			t.Errorf("%s: prompt %d not above limit %d (pool %d)", a.RequestID, a.PromptTokens, a.PrefillLimit, a.PrefillPool)
		}
		if ctx, ok := pools[a.PrefillNode][a.PrefillPool]; !ok || a.PrefillPool >= ctx {
			t.Errorf("%s: pool %d not logged on %s below context (%v)", a.RequestID, a.PrefillPool, a.PrefillNode, pools[a.PrefillNode])
		}
		if finishPrompt[a.PrefillRID] != 1 {
			t.Errorf("%s: prefill Finish prompt_tokens = %d, want placeholder 1", a.RequestID, finishPrompt[a.PrefillRID])
		}
		// TTFT faster than any prefill of the claimed prompt (>= 30k tok/s).
		if ttft := g["ttft_ms"].(float64); ttft*30 >= float64(a.PromptTokens) {
			t.Errorf("%s: ttft %.1f ms plausible for %d tokens", a.RequestID, ttft, a.PromptTokens)
		}
	}

	// Exact lineage: replay page events; at each victim's read, the stale
	// pages' last writers must be exactly truth's sources.
	byRoom := map[uint64]*AffectedRequest{}
	for i := range tr.Affected {
		byRoom[tr.Affected[i].BootstrapRoom] = &tr.Affected[i]
	}
	pe, _ := filepath.Glob(filepath.Join(dir, "page-events", "*.jsonl"))
	checked := 0
	for _, p := range pe {
		last := map[string]uint64{} // rank/page -> room of last write
		forLines(t, p, func(_ int, l string) {
			var e struct {
				Rank  int    `json:"dp_rank"`
				Event string `json:"event"`
				Room  uint64 `json:"bootstrap_room"`
				Pages []int  `json:"pages"`
			}
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatal(err)
			}
			key := func(pg int) string { return strconv.Itoa(e.Rank) + "/" + strconv.Itoa(pg) }
			switch e.Event {
			case "write":
				for _, pg := range e.Pages {
					last[key(pg)] = e.Room
				}
			case "read":
				got := map[uint64]int{}
				for _, pg := range e.Pages {
					if w := last[key(pg)]; w != 0 && w != e.Room {
						got[w]++
					}
				}
				a := byRoom[e.Room]
				if a == nil {
					if len(got) > 0 {
						t.Errorf("room %d read stale pages %v but truth does not list it", e.Room, got)
					}
					return
				}
				want := map[uint64]int{}
				for _, s := range a.Sources {
					if s.Pages > 0 {
						want[s.BootstrapRoom] = s.Pages
					}
				}
				if !mapsEqual(got, want) {
					t.Errorf("%s: page lineage %v, truth %v", a.RequestID, got, want)
				}
				checked++
			}
		})
	}
	if checked == 0 {
		t.Error("no victim reads found in page events")
	}
	if len(tr.ReceivedForeignData) == 0 || len(tr.PossiblyExposed) == 0 {
		t.Errorf("empty tenant lists: %v / %v", tr.ReceivedForeignData, tr.PossiblyExposed)
	}
}

func mapsEqual(a, b map[uint64]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestScenarioOutcomes(t *testing.T) {
	tests := []struct {
		scenario    string
		scale       float64
		wantVictims bool
	}{
		{"clean", 0.05, false},
		{"incident-2026", 0.05, true},
		// Deferred release off, but the decode pool is mostly empty: the
		// aborted room's pages wait on release_pages past the late write.
		{"abort-race", 0.25, false},
	}
	for _, tc := range tests {
		t.Run(tc.scenario, func(t *testing.T) {
			dir := runScenario(t, tc.scenario, 11, tc.scale, false)
			tr, err := LoadTruth(filepath.Join(dir, "truth.json"))
			if err != nil {
				t.Fatal(err)
			}
			if got := len(tr.Affected) > 0; got != tc.wantVictims {
				t.Errorf("affected = %d, want victims: %v", len(tr.Affected), tc.wantVictims)
			}
			if len(tr.Lookalikes) == 0 {
				t.Error("no benign look-alikes")
			}
		})
	}
}
