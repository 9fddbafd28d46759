package main

import (
	"bufio"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/simulate"
)

// TestAffectedTiers: `kvtrail affected` prints the exposure tier, the
// counterparts and the exposed tokens, filters by --tier, lists exposed
// rows most certain first, and rejects an unknown tier as a usage error.
func TestAffectedTiers(t *testing.T) {
	sim := t.TempDir()
	// The incident must happen in the simulated data (with 60 tenants and
	// this seed the long prompts came out over the model's context and were
	// refused with a 400, so nothing leaked and the test had nothing to read).
	truth, err := simulate.Run(context.Background(), simulate.Config{Scenario: "incident-2026", Seed: 1, Scale: 0.1,
		Tenants: 80, OutDir: sim})
	if err != nil {
		t.Fatal(err)
	}
	if truth.ExposedTenants == 0 {
		t.Fatal("the simulated incident exposed no tenant: choose another seed")
	}
	s := testdb.New(t)
	env := []string{"KVTRAIL_CLICKHOUSE_ADDR=" + testdb.Addr(t), "KVTRAIL_CLICKHOUSE_DATABASE=" + s.Database()}
	dir := t.TempDir()
	if _, errOut, code := run(t, dir, env, "ingest", "--manifest", filepath.Join(sim, "sources.yaml")); code != 0 {
		t.Fatalf("ingest: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := run(t, dir, env, "analyze"); code != 0 {
		t.Fatalf("analyze: exit %d\n%s", code, errOut)
	}
	type row struct {
		Tenant       string   `json:"tenant"`
		Role         string   `json:"role"`
		Tier         string   `json:"tier"`
		Counterparts []string `json:"counterparts"`
		PromptTokens int64    `json:"prompt_tokens"`
		OutputTokens int64    `json:"output_tokens"`
		Evidence     []string `json:"evidence_line_ids"`
	}
	list := func(args ...string) []row {
		out, errOut, code := run(t, dir, env, append([]string{"affected", "--format", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("affected %v: exit %d\n%s", args, code, errOut)
		}
		var rows []row
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var r row
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
			}
			rows = append(rows, r)
		}
		return rows
	}
	exposed := list("--role", "exposed")
	if len(exposed) == 0 {
		t.Fatal("no exposed rows")
	}
	prev := -1
	for _, r := range exposed {
		tier, err := domain.ParseTier(r.Tier)
		if err != nil || tier == "" {
			t.Fatalf("exposed row %s has tier %q", r.Tenant, r.Tier)
		}
		if tier.Rank() < prev {
			t.Errorf("exposed rows not most certain first: %s (%s) after rank %d", r.Tenant, r.Tier, prev)
		}
		prev = tier.Rank()
		if len(r.Counterparts) == 0 || len(r.Evidence) == 0 {
			t.Errorf("exposed row %s lacks counterparts or evidence: %+v", r.Tenant, r)
		}
		if tier != domain.Possible && r.PromptTokens+r.OutputTokens == 0 {
			t.Errorf("exposed row %s (%s) has no exposed tokens", r.Tenant, r.Tier)
		}
	}
	total := 0
	for _, tier := range domain.Tiers {
		rows := list("--role", "exposed", "--tier", string(tier))
		for _, r := range rows {
			if r.Tier != string(tier) {
				t.Errorf("--tier %s printed a %q row", tier, r.Tier)
			}
		}
		total += len(rows)
	}
	if total != len(exposed) {
		t.Errorf("tiers add up to %d rows, the unfiltered list has %d", total, len(exposed))
	}
	for _, r := range list("--role", "received") {
		if r.Tier != "" {
			t.Errorf("received row %s has tier %q", r.Tenant, r.Tier)
		}
	}
	out, _, code := run(t, dir, env, "affected", "--format", "csv")
	if code != 0 || !strings.Contains(strings.SplitN(out, "\n", 2)[0], ",tier,counterparts,prompt_tokens,output_tokens,evidence_line_ids") {
		t.Errorf("csv header lacks the exposure columns: %q", strings.SplitN(out, "\n", 2)[0])
	}
	if _, errOut, code := run(t, dir, env, "affected", "--tier", "certain"); code == 0 || !strings.Contains(errOut, "--tier") {
		t.Errorf("--tier certain: exit %d, stderr %q; want a usage error naming --tier", code, errOut)
	}
}
