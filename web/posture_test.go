package web

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// TestFleetPostureAPIAndPage ingests the posture fixtures (a prefill whose
// second boot is 0.5.11 with the #30233 pool, two decodes, a unified
// engine) and reads them back through /api/v1/posture and /fleet.
func TestFleetPostureAPIAndPage(t *testing.T) {
	st := testdb.New(t)
	var srcs []ingest.Source
	for node, role := range map[string]string{"prefill-0": "prefill", "decode-0": "decode", "decode-1": "decode", "unified-0": "unified"} {
		srcs = append(srcs, ingest.Source{Path: filepath.Join("..", "posture", "testdata", node+".log"), Node: node, Role: role, Format: "sglang"})
	}
	if _, err := ingest.New(st, ingest.Options{}).Ingest(context.Background(), srcs); err != nil {
		t.Fatalf("ingest: %v", err)
	}
	u := newTestUI(t, st)

	code, body := u.api(t, "viewer", "GET", "/api/v1/posture", nil)
	if code != http.StatusOK {
		t.Fatalf("posture = %d: %s", code, body)
	}
	var v struct {
		Latest []struct {
			Node    string `json:"node"`
			Version struct {
				Value string `json:"value"`
			} `json:"sglang_version"`
			Bugs []struct {
				BugID  string `json:"bug_id"`
				Status string `json:"status"`
			} `json:"known_bugs"`
		} `json:"latest"`
		Regressions []struct {
			Node    string   `json:"node"`
			NewBugs []string `json:"newly_exposed"`
		} `json:"regressions"`
		Bugs []struct {
			ID string `json:"id"`
		} `json:"known_bugs"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Latest) != 4 {
		t.Fatalf("latest boots = %d, want 4", len(v.Latest))
	}
	exposed := map[string]string{}
	for _, b := range v.Latest {
		for _, e := range b.Bugs {
			if e.Status == "exposed" {
				exposed[b.Node] += e.BugID + " "
			}
		}
	}
	if !strings.Contains(exposed["prefill-0"], "sglang-30233") || exposed["unified-0"] != "" {
		t.Errorf("exposed = %v, want prefill-0 on sglang-30233 and nothing on unified-0", exposed)
	}
	if len(v.Regressions) != 1 || v.Regressions[0].Node != "prefill-0" {
		t.Errorf("regressions = %+v", v.Regressions)
	}

	req, _ := http.NewRequest("GET", u.srv.URL+"/fleet", nil)
	req.Header.Set("Authorization", "Bearer "+testToken("viewer"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		page.Write(buf[:n])
		if err != nil {
			break
		}
	}
	html := page.String()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("fleet page = %d: %.300s", resp.StatusCode, html)
	}
	for _, want := range []string{
		`data-node="prefill-0"`, `href="#sglang-30233"`, `https://github.com/sgl-project/sglang/issues/30233`,
		`id="regressions"`, `href="/fleet" class="on"`, "0.5.11",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("fleet page lacks %q", want)
		}
	}
}
