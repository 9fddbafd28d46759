package chstore

import (
	"context"
	"fmt"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// What analysis workers leave for the one that finishes a job
// (analyze/worker.go, migrations/0011_analysis_slices.sql).

const anInsertSliceResults = `INSERT INTO analysis_slices (job, slice, worker, analyzer, findings, state, error, saved_at)`

// SaveSliceResults writes one slice's results in one INSERT, so a reader
// sees all of them or none.
func (s *Store) SaveSliceResults(ctx context.Context, rows []domain.SliceResult) error {
	if len(rows) == 0 {
		return nil
	}
	b, err := s.PrepareBatch(ctx, anInsertSliceResults)
	if err != nil {
		return fmt.Errorf("prepare slice results insert: %w", err)
	}
	now := time.Now().UTC()
	for _, r := range rows {
		if err := b.Append(r.Job, r.Slice, r.Worker, r.Analyzer, r.Findings, r.State, r.Error, now); err != nil {
			_ = b.Abort()
			return fmt.Errorf("append slice result: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert slice results: %w", err)
	}
	return nil
}

const anSliceResultsSQL = `SELECT slice, worker, analyzer, findings, state, error FROM analysis_slices
WHERE job = ? ORDER BY slice, worker, analyzer`

// SliceResults streams a job's slice results ordered by slice, worker and
// analyzer.
func (s *Store) SliceResults(ctx context.Context, job string, fn func(domain.SliceResult) error) error {
	rows, done, err := s.Stream(ctx, anSliceResultsSQL, job)
	defer done()
	if err != nil {
		return fmt.Errorf("read slice results of %s: %w", job, err)
	}
	defer rows.Close()
	for rows.Next() {
		r := domain.SliceResult{Job: job}
		if err := rows.Scan(&r.Slice, &r.Worker, &r.Analyzer, &r.Findings, &r.State, &r.Error); err != nil {
			return fmt.Errorf("scan slice result: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read slice results of %s: %w", job, err)
	}
	return nil
}
