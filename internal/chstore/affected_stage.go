package chstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// AffectedStage folds a notification list on the server (migration 0019):
// request keys, finding ids and evidence lines are sent to affected_stage
// in inserts of anKeyBatch distinct rows as they are added, and Save
// turns the build's staged rows into the affected rows and their
// affected_keys with two INSERT ... SELECT. A list grows with the exposed
// requests, and a row's arrays were held whole in the analysis and again
// in the insert's columns.
type AffectedStage struct {
	s     *Store
	build string
	// rows are the rows not sent yet, each once: the same writer comes
	// with every victim that read its pages, and the same victim's lines
	// with each of its writers' tenants. At incident-2026 scale 100 the
	// fold adds about 21M rows; 5.2M are sent, in 53 inserts.
	rows map[stageRow]struct{}
	// sending is the result of the insert in flight (nil: none). The
	// inserts took 6.9 s of the server's time at scale 100, which the fold
	// goes on beside; one in flight at a time bounds what is held to two
	// inserts' rows.
	sending chan error
	// sent is how many rows the build has sent: the fold starts once the
	// stage reads as many (settled).
	sent uint64
}

// stageRow is one staged key ('r'), finding id ('f') or evidence line
// ('e') of a list row.
type stageRow struct {
	role, tenant, kind, value string
	line                      uint64
}

// stageColumns are what a key or line sends; stageHeadColumns what a row's
// scalars ('h') and short lists send.
var (
	stageColumns     = []string{"build_id", "affected_role", "tenant", "kind", "value", "line_id"}
	stageHeadColumns = []string{"build_id", "affected_role", "tenant", "kind", "value", "tier", "first_ts", "last_ts",
		"confidence", "prompt_tokens", "output_tokens"}
)

// StageAffected starts a notification list folded on the server, under a
// build id of its own: two builds of one reconstruction never mix.
func (s *Store) StageAffected() domain.AffectedStage {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return &AffectedStage{s: s, build: hex.EncodeToString(b[:]), rows: map[stageRow]struct{}{}}
}

// AddKey stages one request key of the row of role and tenant.
func (a *AffectedStage) AddKey(ctx context.Context, role domain.Role, tenant, key string) error {
	return a.add(ctx, stageRow{role: string(role), tenant: tenant, kind: "r", value: key})
}

// AddFinding stages one finding id of the row of role and tenant.
func (a *AffectedStage) AddFinding(ctx context.Context, role domain.Role, tenant, id string) error {
	return a.add(ctx, stageRow{role: string(role), tenant: tenant, kind: "f", value: id})
}

// AddLines stages evidence lines of the row of role and tenant; 0 is no
// line, as in a finding's evidence.
func (a *AffectedStage) AddLines(ctx context.Context, role domain.Role, tenant string, lines []uint64) error {
	for _, l := range lines {
		if l == 0 {
			continue // no line
		}
		if err := a.add(ctx, stageRow{role: string(role), tenant: tenant, kind: "e", line: l}); err != nil {
			return err
		}
	}
	return nil
}

func (a *AffectedStage) add(ctx context.Context, r stageRow) error {
	a.rows[r] = struct{}{}
	if len(a.rows) < anKeyBatch {
		return nil
	}
	return a.flush(ctx)
}

// flush sends the rows not sent yet.
func (a *AffectedStage) flush(ctx context.Context) error {
	n := len(a.rows)
	if n == 0 {
		return nil
	}
	builds, roles, tenants, kinds, values, lines := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n),
		make([]string, 0, n), make([]string, 0, n), make([]uint64, 0, n)
	for r := range a.rows {
		builds, roles, tenants = append(builds, a.build), append(roles, r.role), append(tenants, r.tenant)
		kinds, values, lines = append(kinds, r.kind), append(values, r.value), append(lines, r.line)
	}
	clear(a.rows)
	if err := a.wait(); err != nil {
		return err
	}
	a.sent += uint64(n)
	a.sending = make(chan error, 1)
	go func(done chan<- error) {
		done <- a.s.insertColumns(ctx, "affected_stage", stageColumns, builds, roles, tenants, kinds, values, lines)
	}(a.sending)
	return nil
}

// wait returns once no insert is in flight, with its error.
func (a *AffectedStage) wait() error {
	if a.sending == nil {
		return nil
	}
	err := <-a.sending
	a.sending = nil
	if err != nil {
		return fmt.Errorf("stage the notification list: %w", err)
	}
	return nil
}

// The fold of a build into the list. A row's lists come back sorted and
// unique (arraySort of groupUniqArray: byte order, as Go sorts strings);
// a staged row without its scalars ('h') is not a row of the list, and
// its keys are no lookup rows. GLOBAL IN: on a cluster the subquery reads
// the Distributed table once, where a plain IN is refused there. The
// lookup rows are not made distinct: a key staged in two inserts comes
// twice, affected_keys (a ReplacingMergeTree) merges the copies, and its
// readers group or take distinct rows; a DISTINCT held every key, 615 MB
// of the server's memory at scale 100.
const (
	stageFoldSQL = `INSERT INTO affected (reconstruction_id, case_id, tenant, affected_role, requests, first_ts,
 last_ts, models, nodes, confidence, request_keys, finding_ids, created_at, tier, counterparts, prompt_tokens,
 output_tokens, evidence_line_ids)
SELECT ?, ?, tenant, affected_role, length(s_keys), s_first, s_last, s_models, s_nodes, s_conf, s_keys, s_finds, ?,
 s_tier, s_cps, s_prompt, s_output, s_lines
FROM (
    SELECT affected_role, tenant,
        anyIf(tier, kind = 'h') AS s_tier, anyIf(first_ts, kind = 'h') AS s_first,
        anyIf(last_ts, kind = 'h') AS s_last, anyIf(confidence, kind = 'h') AS s_conf,
        anyIf(prompt_tokens, kind = 'h') AS s_prompt, anyIf(output_tokens, kind = 'h') AS s_output,
        arraySort(groupUniqArrayIf(value, kind = 'r')) AS s_keys,
        arraySort(groupUniqArrayIf(value, kind = 'f')) AS s_finds,
        arraySort(groupUniqArrayIf(value, kind = 'm')) AS s_models,
        arraySort(groupUniqArrayIf(value, kind = 'n')) AS s_nodes,
        arraySort(groupUniqArrayIf(value, kind = 'c')) AS s_cps,
        arraySort(groupUniqArrayIf(line_id, kind = 'e')) AS s_lines,
        countIf(kind = 'h') AS s_heads
    FROM affected_stage
    WHERE build_id = ?
    GROUP BY affected_role, tenant
)
WHERE s_heads > 0`
	stageKeysSQL = `INSERT INTO affected_keys (reconstruction_id, key, affected_role, tenant)
SELECT ?, concat(kind, ':', value), affected_role, tenant
FROM affected_stage
WHERE build_id = ? AND kind IN ('r', 'f')
    AND (affected_role, tenant) GLOBAL IN (SELECT affected_role, tenant FROM affected_stage WHERE build_id = ? AND kind = 'h')`
	stageTallySQL = `SELECT affected_role, tenant, count(), uniqExactIf(value, kind = 'r')
FROM affected_stage
WHERE build_id = ?
GROUP BY affected_role, tenant`
)

// Save stores the list (domain.AffectedStage): the rows' scalars and
// short lists are staged beside the keys and lines, the rows and their
// lookup keys are written at once (a reader in between may find a list
// without its keys for a few seconds, as when the rows were written
// first), and the build's partition is dropped whatever happened.
func (a *AffectedStage) Save(ctx context.Context, id, caseID string, created time.Time, rows []domain.AffectedRow) (err error) {
	defer func() { err = errors.Join(err, a.Discard(ctx)) }()
	if len(rows) == 0 {
		return nil
	}
	for _, r := range rows {
		for _, k := range r.RequestKeys {
			if err := a.AddKey(ctx, r.Role, r.Tenant, k); err != nil {
				return err
			}
		}
		for _, f := range r.FindingIDs {
			if err := a.AddFinding(ctx, r.Role, r.Tenant, f); err != nil {
				return err
			}
		}
		if err := a.AddLines(ctx, r.Role, r.Tenant, r.Evidence); err != nil {
			return err
		}
	}
	if err := a.flush(ctx); err != nil {
		return err
	}
	if err := a.wait(); err != nil {
		return err
	}
	if err := a.saveHeads(ctx, rows); err != nil {
		return err
	}
	if err := a.settled(ctx, rows); err != nil {
		return err
	}
	// The rows and their lookup keys at once: each statement took 5-7 s
	// of one server core at scale 100, and they read the stage alone.
	keys := make(chan error, 1)
	go func() { keys <- a.s.Exec(ctx, stageKeysSQL, id, a.build, a.build) }()
	foldErr := a.s.Exec(ctx, stageFoldSQL, id, caseID, created.UTC(), a.build)
	if err := <-keys; err != nil {
		return errors.Join(fmt.Errorf("write the notification list's lookup keys: %w", err), foldErr)
	}
	if foldErr != nil {
		return fmt.Errorf("fold the notification list: %w", foldErr)
	}
	// Housekeeping, not the list: a failure is logged, not returned.
	if err := a.s.dropStaleStages(ctx, time.Now().Add(-staleStage)); err != nil {
		slog.Warn("drop staged notification lists left by crashed analyses", "err", err)
	}
	return nil
}

// stageSettle is how long Save waits for the stage to read every row the
// build sent before it gives up on the list.
var stageSettle = 30 * time.Second

// settled returns once the stage reads every row the build sent, and
// sets each row's Requests to its distinct staged keys from the same read.
// On a cluster the stage's shard may answer from a replica that has not
// fetched them all yet (a failover, or a host that wrote to itself:
// firstReplicasFirst), and a fold then would store a list short of
// requests, silently; a list that cannot be read whole is not stored.
func (a *AffectedStage) settled(ctx context.Context, rows []domain.AffectedRow) error {
	deadline := time.Now().Add(stageSettle)
	for pause := 50 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		n, requests, err := a.tally(ctx)
		if err != nil {
			return err
		}
		if n == a.sent {
			for i := range rows {
				rows[i].Requests = requests[[2]string{string(rows[i].Role), rows[i].Tenant}]
			}
			return nil
		}
		if n > a.sent || time.Now().After(deadline) {
			return fmt.Errorf("the staged notification list reads %d rows, %d were sent: a replica of its shard is behind "+
				"or lost them, and the list is not stored (run the analysis again)", n, a.sent)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

// tally reads the build's staged rows: how many, and each list row's
// distinct request keys.
func (a *AffectedStage) tally(ctx context.Context) (uint64, map[[2]string]int, error) {
	res, err := a.s.Query(ctx, stageTallySQL, a.build)
	if err != nil {
		return 0, nil, fmt.Errorf("count the staged notification list: %w", err)
	}
	defer res.Close()
	var total uint64
	requests := map[[2]string]int{}
	for res.Next() {
		var role, tenant string
		var n, keys uint64
		if err := res.Scan(&role, &tenant, &n, &keys); err != nil {
			return 0, nil, fmt.Errorf("scan the staged notification list's counts: %w", err)
		}
		total += n
		requests[[2]string{role, tenant}] = int(keys)
	}
	if err := res.Err(); err != nil {
		return 0, nil, fmt.Errorf("count the staged notification list: %w", err)
	}
	return total, requests, nil
}

// staleStage is when a build still staged is one a crashed (or killed)
// analysis left: a build lives for its reconstruction, minutes.
const staleStage = 24 * time.Hour

// stagedBuild is a build's partition as system.parts shows it, a build id
// being 24 hex digits: bare on 18.16, quoted where a server quotes it.
var stagedBuild = regexp.MustCompile(`^'?([0-9a-f]{24})'?$`)

// dropStaleStages drops the staged builds whose newest part is older than
// before, on every host in cluster mode.
func (s *Store) dropStaleStages(ctx context.Context, before time.Time) error {
	l := s.Layout()
	table := l.local("affected_stage")
	var stale []struct {
		Partition string `ch:"partition"`
	}
	if err := s.Select(ctx, &stale, `SELECT partition FROM `+l.system("parts")+`
WHERE database = ? AND table = ? AND active
GROUP BY partition
HAVING max(modification_time) < ?`, s.db, table, before.UTC()); err != nil {
		return fmt.Errorf("list staged builds: %w", err)
	}
	for _, p := range stale {
		m := stagedBuild.FindStringSubmatch(p.Partition)
		if m == nil {
			continue // not a build's partition: not ours to drop
		}
		q := fmt.Sprintf("ALTER TABLE %s.%s%s DROP PARTITION '%s'", s.db, table, l.onCluster(), m[1])
		if err := s.ExecDDL(ctx, q); err != nil {
			return fmt.Errorf("drop staged build %s: %w", p.Partition, err)
		}
	}
	return nil
}

// saveHeads stages each row's scalars and its models, nodes and
// counterparts, in inserts of anKeyBatch.
func (a *AffectedStage) saveHeads(ctx context.Context, rows []domain.AffectedRow) error {
	var c struct {
		builds, roles, tenants, kinds, values, tiers []string
		first, last                                  []time.Time
		conf                                         []float64
		prompt, output                               []int64
	}
	send := func() error {
		if len(c.builds) == 0 {
			return nil
		}
		if err := a.s.insertColumns(ctx, "affected_stage", stageHeadColumns, c.builds, c.roles, c.tenants, c.kinds,
			c.values, c.tiers, c.first, c.last, c.conf, c.prompt, c.output); err != nil {
			return fmt.Errorf("stage the notification list's rows: %w", err)
		}
		a.sent += uint64(len(c.builds))
		c.builds, c.roles, c.tenants, c.kinds, c.values, c.tiers = nil, nil, nil, nil, nil, nil
		c.first, c.last, c.conf, c.prompt, c.output = nil, nil, nil, nil, nil
		return nil
	}
	add := func(r *domain.AffectedRow, kind, value string) error {
		c.builds, c.roles, c.tenants = append(c.builds, a.build), append(c.roles, string(r.Role)), append(c.tenants, r.Tenant)
		c.kinds, c.values = append(c.kinds, kind), append(c.values, value)
		if kind != "h" {
			r = &domain.AffectedRow{First: time.Unix(0, 0), Last: time.Unix(0, 0)}
		}
		c.tiers, c.first, c.last = append(c.tiers, string(r.Tier)), append(c.first, r.First.UTC()), append(c.last, r.Last.UTC())
		c.conf, c.prompt, c.output = append(c.conf, r.Confidence), append(c.prompt, r.PromptTokens), append(c.output, r.OutputTokens)
		if len(c.builds) >= anKeyBatch {
			return send()
		}
		return nil
	}
	for i := range rows {
		r := &rows[i]
		if err := add(r, "h", ""); err != nil {
			return err
		}
		for _, l := range []struct {
			kind string
			vs   []string
		}{{"m", r.Models}, {"n", r.Nodes}, {"c", r.Counterparts}} {
			for _, v := range l.vs {
				if err := add(r, l.kind, v); err != nil {
					return err
				}
			}
		}
	}
	return send()
}

// Discard drops the build's staged rows: its partition, on every replica
// in cluster mode, once no insert is in flight (its error was the
// caller's already, or is moot).
func (a *AffectedStage) Discard(ctx context.Context) error {
	clear(a.rows)
	_ = a.wait()
	l := a.s.Layout()
	q := fmt.Sprintf("ALTER TABLE %s.%s%s DROP PARTITION '%s'", a.s.db, l.local("affected_stage"), l.onCluster(), a.build)
	if err := a.s.ExecDDL(context.WithoutCancel(ctx), q); err != nil {
		return fmt.Errorf("drop the staged notification list %s: %w", a.build, err)
	}
	return nil
}
