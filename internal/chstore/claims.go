package chstore

import (
	"context"
	"fmt"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// The statements behind internal/workclaim: work_claims (migration 0009)
// is append-only, so a claim is one insert and deciding who holds a unit
// is a read of its rows; the rules live in workclaim, not here.

const claimInsert = `INSERT INTO work_claims (job, unit, attempt, worker, state, at_ns, lease_until_ns, day)`

// InsertClaim appends one claim row. A one-row batch, not INSERT ...
// VALUES: 18.16 hangs on that over the native protocol. In cluster mode
// the insert is synchronous (insert_distributed_sync), so once it returns
// a read through the same replica sees the row (the reads' replica: kvtrail
// connects to a first replica, firstReplicasFirst).
func (s *Store) InsertClaim(ctx context.Context, c domain.Claim) error {
	x, err := s.PrepareBatch(ctx, claimInsert)
	if err != nil {
		return fmt.Errorf("insert claim %s/%s: %w", c.Job, c.Unit, err)
	}
	if err := x.Append(c.Job, c.Unit, c.Attempt, c.Worker, c.State, claimNanos(c.At), claimNanos(c.LeaseUntil),
		ingDateTime(c.At)); err != nil {
		_ = x.Abort()
		return fmt.Errorf("insert claim %s/%s: %w", c.Job, c.Unit, err)
	}
	if err := x.Send(); err != nil {
		return fmt.Errorf("insert claim %s/%s: %w", c.Job, c.Unit, err)
	}
	return nil
}

// JobClaims returns every claim row of job, or of one unit of it when unit
// is not "", ordered by unit, attempt, time and worker.
func (s *Store) JobClaims(ctx context.Context, job, unit string) ([]domain.Claim, error) {
	q := `SELECT unit, attempt, worker, state, at_ns, lease_until_ns FROM work_claims WHERE job = ?`
	args := []any{job}
	if unit != "" {
		q += ` AND unit = ?`
		args = append(args, unit)
	}
	q += ` ORDER BY unit, attempt, at_ns, worker`
	rows, err := s.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read claims of %s: %w", job, err)
	}
	defer rows.Close()
	var out []domain.Claim
	for rows.Next() {
		c := domain.Claim{Job: job}
		var at, until uint64
		if err := rows.Scan(&c.Unit, &c.Attempt, &c.Worker, &c.State, &at, &until); err != nil {
			return nil, fmt.Errorf("read claims of %s: %w", job, err)
		}
		c.At, c.LeaseUntil = time.Unix(0, int64(at)).UTC(), time.Unix(0, int64(until)).UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read claims of %s: %w", job, err)
	}
	return out, nil
}

// claimNanos is t as UInt64 nanoseconds since the epoch (0 for earlier).
func claimNanos(t time.Time) uint64 {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return 0
	}
	return uint64(t.UnixNano())
}
