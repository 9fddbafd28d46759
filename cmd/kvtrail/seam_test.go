package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvtrail/kvtrail/internal/apitoken"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

// TestCLIAndAPITellTheSameStory is the seam test: one simulated incident,
// ingested and analyzed (twice) by the CLI, then read through the CLI and
// through a running `kvtrail serve`'s API. Both must list the same
// findings (no doubling after two analyses), the same notification list,
// and every line a finding cites about a request must be on that
// request's page.
func TestCLIAndAPITellTheSameStory(t *testing.T) {
	ctx := context.Background()
	sim := t.TempDir()
	if _, err := simulate.Run(ctx, simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.02, Days: 2, OutDir: sim}); err != nil {
		t.Fatal(err)
	}
	s := testdb.New(t)
	env := []string{"KVTRAIL_CLICKHOUSE_ADDR=" + testdb.Addr(t), "KVTRAIL_CLICKHOUSE_DATABASE=" + s.Database()}
	dir := t.TempDir()
	mustRun := func(args ...string) string {
		t.Helper()
		out, errOut, code := run(t, dir, env, args...)
		if code != 0 {
			t.Fatalf("kvtrail %v: exit %d\n%s", args, code, errOut)
		}
		return out
	}
	mustRun("ingest", "--manifest", filepath.Join(sim, "sources.yaml"))
	mustRun("analyze")
	mustRun("analyze") // a second analysis must not double anything

	type cliFinding struct {
		ID       string   `json:"finding_id"`
		Severity string   `json:"severity"`
		Request  string   `json:"request_id"`
		Evidence []string `json:"evidence_line_ids"`
	}
	var cliFindings []cliFinding
	for _, line := range nonEmptyLines(mustRun("findings", "--format", "json")) {
		var f cliFinding
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("findings json %q: %v", line, err)
		}
		cliFindings = append(cliFindings, f)
	}
	var cliAffected []string
	for _, line := range nonEmptyLines(mustRun("affected", "--format", "json")) {
		var a struct {
			Tenant string `json:"tenant"`
			Role   string `json:"role"`
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("affected json %q: %v", line, err)
		}
		cliAffected = append(cliAffected, a.Tenant+" "+a.Role)
	}
	if len(cliFindings) == 0 || len(cliAffected) == 0 {
		t.Fatalf("the incident gave %d findings and %d affected rows; the comparison needs both", len(cliFindings), len(cliAffected))
	}

	token, hash, err := apitoken.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("auth:\n  tokens:\n    - name: seam\n      role: admin\n      token_hash: %q\n", hash)
	if err := os.WriteFile(filepath.Join(dir, "kvtrail.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serveForTest(t, dir, env)
	api := func(method, path string, body any, out any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "application/json")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s = %d: %.300s", method, path, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %.300s", method, path, err, b)
		}
	}

	// Findings: the same ids, each once.
	var apiIDs []string
	var total uint64
	for cursor := ""; ; {
		var page struct {
			Findings []struct {
				ID string `json:"finding_id"`
			} `json:"findings"`
			Total uint64 `json:"total"`
			Next  string `json:"next"`
		}
		api("GET", "/api/v1/findings?limit=500&cursor="+url.QueryEscape(cursor), nil, &page)
		total = page.Total
		for _, f := range page.Findings {
			apiIDs = append(apiIDs, f.ID)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	var cliIDs []string
	for _, f := range cliFindings {
		cliIDs = append(cliIDs, f.ID)
	}
	slices.Sort(cliIDs)
	slices.Sort(apiIDs)
	if !slices.Equal(cliIDs, apiIDs) || total != uint64(len(cliIDs)) {
		t.Errorf("CLI lists %d findings, the API %d (total %d); they differ", len(cliIDs), len(apiIDs), total)
	}

	// The notification list of a case over the whole incident.
	var cs struct {
		ID string `json:"case_id"`
	}
	api("POST", "/api/v1/cases", map[string]any{"name": "seam", "window_from": "2026-01-01T00:00:00Z",
		"window_to": "2027-01-01T00:00:00Z"}, &cs)
	if cs.ID == "" {
		t.Fatal("the API created a case without an id")
	}
	var list struct {
		Rows []struct {
			Tenant string `json:"tenant"`
			Role   string `json:"affected_role"`
		} `json:"rows"`
	}
	api("GET", "/api/v1/cases/"+cs.ID+"/affected", nil, &list)
	var apiAffected []string
	for _, r := range list.Rows {
		apiAffected = append(apiAffected, r.Tenant+" "+r.Role)
	}
	slices.Sort(cliAffected)
	slices.Sort(apiAffected)
	if !slices.Equal(cliAffected, apiAffected) {
		t.Errorf("notification list: CLI %v, API %v", cliAffected, apiAffected)
	}

	// Every line a HIGH finding cites is on its request's page.
	checked := 0
	for _, f := range cliFindings {
		if f.Severity != "HIGH" || f.Request == "" || checked == 5 {
			continue
		}
		checked++
		var tl struct {
			Lines []struct {
				ID json.RawMessage `json:"line_id"`
			} `json:"evidence_lines"`
		}
		api("GET", "/api/v1/requests/"+url.PathEscape(f.Request), nil, &tl)
		on := map[string]bool{}
		for _, l := range tl.Lines {
			on[strings.Trim(string(l.ID), `"`)] = true
		}
		for _, id := range f.Evidence {
			if !on[id] {
				t.Errorf("finding %s cites line %s, which request %s's page does not show", f.ID, id, f.Request)
			}
		}
	}
	if checked == 0 {
		t.Error("no HIGH finding names a gateway request; the request-page check proved nothing")
	}
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// serveForTest starts `kvtrail serve` in dir (its kvtrail.yaml) on a free
// port and returns its base URL; the process is stopped with the test.
func serveForTest(t *testing.T, dir string, env []string) string {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0")
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	url, _ := startServing(t, cmd, []string{"serve"})
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return url
}
