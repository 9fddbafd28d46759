package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/apitoken"
	"github.com/kvtrail/kvtrail/internal/chdbstore"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

// chdbLibrary finds libchdb.so as kvtrail does. Without it the embedded
// tests skip on a developer machine, but fail in CI (scripts/test.sh
// fetches it and exports CHDB_LIB_PATH).
func chdbLibrary(t *testing.T) string {
	t.Helper()
	lib, err := chdbstore.FindLibrary("")
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv(testdb.EnvRequire) == "1" {
			t.Fatalf("the embedded engine's library is required in CI: %v", err)
		}
		t.Skipf("no libchdb.so: %v", err)
	}
	return lib
}

// incidentStory is what the CLI says about an analyzed incident.
type incidentStory struct {
	findings []string // finding id, severity, request
	affected []string // tenant, role, tier
}

func tellStory(t *testing.T, mustRun func(args ...string) string) incidentStory {
	t.Helper()
	var st incidentStory
	for _, line := range nonEmptyLines(mustRun("findings", "--format", "json")) {
		var f struct {
			ID       string `json:"finding_id"`
			Severity string `json:"severity"`
			Request  string `json:"request_id"`
		}
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("findings json %q: %v", line, err)
		}
		st.findings = append(st.findings, f.ID+" "+f.Severity+" "+f.Request)
	}
	for _, line := range nonEmptyLines(mustRun("affected", "--format", "json")) {
		var a struct {
			Tenant string `json:"tenant"`
			Role   string `json:"role"`
			Tier   string `json:"tier"`
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("affected json %q: %v", line, err)
		}
		st.affected = append(st.affected, a.Tenant+" "+a.Role+" "+a.Tier)
	}
	slices.Sort(st.findings)
	slices.Sort(st.affected)
	return st
}

// TestEmbeddedEngineEndToEnd runs one small incident through the embedded
// engine (clickhouse.engine: embedded) the way an investigator would:
// ingest, analyze, findings and the affected list from the CLI, then the
// UI and API of a `kvtrail serve` on the same directory. While it serves,
// another command is refused with exit code 5 naming the server and its
// URL; once the server is killed (SIGKILL), the store opens again with
// every row. An ingest killed mid-write and run again tells the same story,
// and so does the managed 18.16 server for the same logs.
func TestEmbeddedEngineEndToEnd(t *testing.T) {
	lib := chdbLibrary(t)
	ctx := context.Background()
	sim := t.TempDir()
	if _, err := simulate.Run(ctx, simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.02, Days: 2, OutDir: sim}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	env := []string{"KVTRAIL_CLICKHOUSE_ENGINE=embedded", "KVTRAIL_LOCAL_EMBEDDED_DIR=" + store, "CHDB_LIB_PATH=" + lib}
	runIn := func(env []string) func(args ...string) string {
		return func(args ...string) string {
			t.Helper()
			out, errOut, code := run(t, dir, env, args...)
			if code != 0 {
				t.Fatalf("kvtrail %v: exit %d\n%s", args, code, errOut)
			}
			return out
		}
	}
	mustRun := runIn(env)
	mustRun("ingest", "--manifest", filepath.Join(sim, "sources.yaml"))
	mustRun("analyze")
	embedded := tellStory(t, mustRun)
	if len(embedded.findings) == 0 || len(embedded.affected) == 0 {
		t.Fatalf("the embedded engine found %d findings and %d affected rows; the incident has both", len(embedded.findings), len(embedded.affected))
	}
	if _, err := os.Stat(filepath.Join(store, chdbstore.LockFile)); err != nil {
		t.Fatalf("the store has no lock file: %v", err)
	}

	// The UI and API of a server on the same store.
	token, hash, err := apitoken.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("auth:\n  tokens:\n    - name: e2e\n      role: admin\n      token_hash: %q\n", hash)
	if err := os.WriteFile(filepath.Join(dir, "kvtrail.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(binary, "serve", "--addr", "127.0.0.1:0")
	srv.Dir = dir
	srv.Env = append(cleanEnv(), env...)
	base, _ := startServing(t, srv, []string{"serve"})
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	get := func(path string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := get("/readyz"); code != 200 {
		t.Fatalf("/readyz = %d: %s", code, b)
	}
	var page struct {
		Total uint64 `json:"total"`
	}
	if code, b := get("/api/v1/findings?limit=1"); code != 200 || json.Unmarshal(b, &page) != nil || page.Total != uint64(len(embedded.findings)) {
		t.Fatalf("GET /api/v1/findings = %d, total %d, want %d: %.300s", code, page.Total, len(embedded.findings), b)
	}
	if code, b := get("/"); code != 200 || !strings.Contains(string(b), "<html") {
		t.Fatalf("the UI's home page = %d: %.200s", code, b)
	}

	// A second process on the store: refused, told who holds it and where.
	for _, args := range [][]string{{"findings"}, {"ingest", "--manifest", filepath.Join(sim, "sources.yaml")}, {"serve", "--addr", "127.0.0.1:0"}} {
		_, errOut, code := run(t, dir, env, args...)
		if code != 5 {
			t.Fatalf("kvtrail %v while serve holds the store: exit %d, want 5 (conflict)\n%s", args, code, errOut)
		}
		for _, want := range []string{store, "`kvtrail serve`", "pid " + strconv.Itoa(srv.Process.Pid), base} {
			if !strings.Contains(errOut, want) {
				t.Errorf("kvtrail %v: the refusal lacks %q:\n%s", args, want, errOut)
			}
		}
	}

	// Killed outright, the server leaves no stale lock and loses nothing.
	_ = srv.Process.Kill()
	_ = srv.Wait()
	deadline := time.Now().Add(10 * time.Second)
	var after incidentStory
	for {
		_, errOut, code := run(t, dir, env, "findings", "--format", "json")
		if code == 0 {
			after = tellStory(t, mustRun)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the server was killed, findings still fails: exit %d\n%s", code, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !slices.Equal(after.findings, embedded.findings) || !slices.Equal(after.affected, embedded.affected) {
		t.Fatalf("after SIGKILL the store holds %d findings and %d affected rows, before %d and %d",
			len(after.findings), len(after.affected), len(embedded.findings), len(embedded.affected))
	}

	// An ingest killed (SIGKILL) while it writes rows, then run again,
	// gives the same story as the clean run: the engine's parts are
	// atomic, the lock dies with the process, and ingest resumes.
	// A second store; the last of duplicate variables wins (os/exec).
	killed := append(slices.Clone(env), "KVTRAIL_LOCAL_EMBEDDED_DIR="+filepath.Join(dir, "store2"))
	ing := exec.Command(binary, "ingest", "--manifest", filepath.Join(sim, "sources.yaml"))
	ing.Dir = dir
	ing.Env = append(cleanEnv(), killed...)
	if err := ing.Start(); err != nil {
		t.Fatal(err)
	}
	inserts := filepath.Join(dir, "store2", "inserts")
	writing := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !writing; {
		// A Native file in inserts/ is a batch being loaded right now.
		if ents, _ := os.ReadDir(inserts); len(ents) > 0 {
			writing = true
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = ing.Process.Kill()
	werr := ing.Wait()
	if !writing || werr == nil {
		t.Fatalf("the ingest was not caught writing rows (saw a batch: %v, exit: %v)", writing, werr)
	}
	resumed := runIn(killed)
	resumed("ingest", "--manifest", filepath.Join(sim, "sources.yaml"))
	resumed("analyze")
	if got := tellStory(t, resumed); !slices.Equal(got.findings, embedded.findings) || !slices.Equal(got.affected, embedded.affected) {
		t.Fatalf("killed and resumed: %d findings and %d affected rows, a clean run %d and %d",
			len(got.findings), len(got.affected), len(embedded.findings), len(embedded.affected))
	}

	// The same logs on the managed server's engine (18.16) tell the same story.
	s := testdb.New(t)
	server := tellStory(t, func() func(args ...string) string {
		f := runIn([]string{"KVTRAIL_CLICKHOUSE_ADDR=" + testdb.Addr(t), "KVTRAIL_CLICKHOUSE_DATABASE=" + s.Database()})
		f("ingest", "--manifest", filepath.Join(sim, "sources.yaml"))
		f("analyze")
		return f
	}())
	if !slices.Equal(server.findings, embedded.findings) {
		t.Errorf("findings differ: server %d, embedded %d\nonly on the server: %v\nonly embedded: %v", len(server.findings), len(embedded.findings),
			head(minus(server.findings, embedded.findings)), head(minus(embedded.findings, server.findings)))
	}
	if !slices.Equal(server.affected, embedded.affected) {
		t.Errorf("affected lists differ:\nserver:   %v\nembedded: %v", server.affected, embedded.affected)
	}
	t.Logf("embedded and server: %d findings, %d affected rows", len(embedded.findings), len(embedded.affected))
}
