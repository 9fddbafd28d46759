package posture_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/posture"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// fleetDB ingests testdata's four nodes into a fresh database.
func fleetDB(t *testing.T) *chstore.Store {
	t.Helper()
	s := testdb.New(t)
	var srcs []ingest.Source
	for node, role := range map[string]string{"prefill-0": "prefill", "decode-0": "decode", "decode-1": "decode", "decode-2": "decode", "unified-0": "unified"} {
		srcs = append(srcs, ingest.Source{Path: filepath.Join("testdata", node+".log"), Node: node, Role: role, Format: "sglang"})
	}
	if _, err := ingest.New(s, ingest.Options{}).Ingest(context.Background(), srcs); err != nil {
		t.Fatalf("ingest: %v", err)
	}
	return s
}

func TestLoadFleetPosture(t *testing.T) {
	f, err := posture.Load(context.Background(), fleetDB(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Boots) != 6 {
		for _, b := range f.Boots {
			t.Logf("%s %s %s", b.Node, b.BootID, b.BootTS)
		}
		t.Fatalf("boots = %d, want 6 (prefill-0 twice, decode-0, decode-1, decode-2, unified-0)", len(f.Boots))
	}
	get := func(node string, i int) *posture.BootPosture {
		bs := f.Node(node)
		if i >= len(bs) {
			t.Fatalf("%s has %d boots, want boot %d", node, len(bs), i)
		}
		return bs[i]
	}
	status := func(p *posture.BootPosture, bug string) string {
		for _, e := range p.Bugs {
			if e.BugID == bug {
				if len(e.Sources) == 0 || !strings.HasPrefix(e.Sources[0].URL, "https://github.com/sgl-project/sglang/") {
					t.Errorf("%s %s: no upstream source", p.Node, bug)
				}
				return e.Status
			}
		}
		t.Fatalf("%s: no verdict for %s", p.Node, bug)
		return ""
	}
	cases := []struct {
		name string
		p    *posture.BootPosture
		want map[string]string // field -> value
		bugs map[string]string // bug -> status
	}{
		{"prefill first boot: 0.5.22, pool above context", get("prefill-0", 0),
			map[string]string{"mode": "prefill", "version": "0.5.22", "page": "64", "pool": "1310720", "ctx": "1048576",
				"maxreq": "1048570", "below": "no", "deferred": "off", "backend": "mooncake"},
			map[string]string{"sglang-30233": posture.ConditionOff, "sglang-33507": posture.Exposed, "sglang-24527": posture.NotApplicable}},
		{"prefill second boot: 0.5.11, pool below context (#30233 numbers)", get("prefill-0", 1),
			map[string]string{"mode": "prefill", "version": "0.5.11", "pool": "284928", "maxreq": "284922", "below": "yes", "deferred": posture.UnknownValue},
			map[string]string{"sglang-30233": posture.Exposed}},
		{"decode with deferred release on and the read check seen", get("decode-0", 0),
			map[string]string{"mode": "decode", "version": "0.5.22", "deferred": "on", "readcheck": "present", "below": "no"},
			map[string]string{"sglang-24527": posture.Mitigated, "sglang-17259": posture.Mitigated, "sglang-30233": posture.NotApplicable}},
		{"decode with nothing but server_args and limits", get("decode-1", 0),
			map[string]string{"mode": "decode", "version": posture.UnknownValue, "deferred": posture.UnknownValue, "readcheck": posture.UnknownValue},
			map[string]string{"sglang-24527": posture.Unknown, "sglang-17259": posture.Unknown}},
		// No environment dump, but deferred releases that timed out (in two
		// hours): the switch was on, and the pages of those aborts went
		// back without the drain ack, so the late-write bug is exposed.
		{"decode whose deferred releases timed out", get("decode-2", 0),
			map[string]string{"mode": "decode", "deferred": "on", "timeouts": "2"},
			map[string]string{"sglang-24527": posture.Exposed}},
		{"unified engine", get("unified-0", 0),
			map[string]string{"mode": "none", "page": posture.UnknownValue, "below": "no", "version": posture.UnknownValue},
			map[string]string{"sglang-30233": posture.NotApplicable, "sglang-24527": posture.NotApplicable}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.p
			got := map[string]string{"mode": p.PDMode.Value, "version": p.Version.Value, "page": p.PageSize.Value,
				"pool": p.PoolTokens.Value, "ctx": p.ContextLen.Value, "maxreq": p.MaxReqInputLen.Value,
				"below": p.PoolBelowContext.Value, "deferred": p.DeferredRelease.Value, "readcheck": p.ReadCheck.Value,
				"backend": p.TransferBackend.Value, "timeouts": fmt.Sprint(p.ReleaseTimeouts)}
			for k, want := range c.want {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
			for bug, want := range c.bugs {
				if s := status(p, bug); s != want {
					t.Errorf("%s: %s, want %s", bug, s, want)
				}
			}
			if len(p.Evidence) == 0 {
				t.Error("no evidence lines")
			}
		})
	}
	if p := get("prefill-0", 1); p.RejectThreshold != 284922 {
		t.Errorf("reject threshold = %d, want 284922", p.RejectThreshold)
	}

	regs := f.Regressions()
	if len(regs) != 1 || regs[0].Node != "prefill-0" {
		t.Fatalf("regressions = %+v, want one on prefill-0", regs)
	}
	joined := strings.Join(regs[0].Changes, "; ")
	for _, want := range []string{"version went down: 0.5.22 -> 0.5.11", "fell below the context length"} {
		if !strings.Contains(joined, want) {
			t.Errorf("changes %q lack %q", joined, want)
		}
	}
	if strings.Join(regs[0].NewBugs, ",") != "sglang-30233" {
		t.Errorf("newly exposed = %v, want [sglang-30233]", regs[0].NewBugs)
	}
}
