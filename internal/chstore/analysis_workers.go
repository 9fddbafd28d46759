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

const anInsertReplayParts = `INSERT INTO replay_parts (job, ask, unit, worker, kind, data, saved_at)`

// SaveReplayPart writes one part of a job's shared replay (an ask, or one
// node's answer) in one INSERT.
func (s *Store) SaveReplayPart(ctx context.Context, p domain.ReplayPart) error {
	b, err := s.PrepareBatch(ctx, anInsertReplayParts)
	if err != nil {
		return fmt.Errorf("prepare replay part insert: %w", err)
	}
	if err := b.Append(p.Job, p.Ask, p.Unit, p.Worker, p.Kind, p.Data, time.Now().UTC()); err != nil {
		_ = b.Abort()
		return fmt.Errorf("append replay part: %w", err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert replay part: %w", err)
	}
	return nil
}

const (
	anReplayAsksSQL = `SELECT ask, unit, worker, data FROM replay_parts
WHERE job = ? AND kind = 'ask' AND ask > ? ORDER BY ask, unit, worker`
	anReplayAnswersSQL = `SELECT ask, unit, worker, data FROM replay_parts
WHERE job = ? AND kind = 'answer' AND ask = ? ORDER BY ask, unit, worker`
)

// ReplayAsks streams a job's replay asks whose id sorts after after (""
// for all), in id order.
func (s *Store) ReplayAsks(ctx context.Context, job, after string, fn func(domain.ReplayPart) error) error {
	return s.replayParts(ctx, anReplayAsksSQL, job, "ask", after, fn)
}

// ReplayAnswers streams the answers to one replay ask of a job, by unit
// and worker.
func (s *Store) ReplayAnswers(ctx context.Context, job, ask string, fn func(domain.ReplayPart) error) error {
	return s.replayParts(ctx, anReplayAnswersSQL, job, "answer", ask, fn)
}

func (s *Store) replayParts(ctx context.Context, query, job, kind, ask string, fn func(domain.ReplayPart) error) error {
	rows, done, err := s.Stream(ctx, query, job, ask)
	defer done()
	if err != nil {
		return fmt.Errorf("read replay %ss of %s: %w", kind, job, err)
	}
	defer rows.Close()
	for rows.Next() {
		p := domain.ReplayPart{Job: job, Kind: kind}
		if err := rows.Scan(&p.Ask, &p.Unit, &p.Worker, &p.Data); err != nil {
			return fmt.Errorf("scan replay %s: %w", kind, err)
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read replay %ss of %s: %w", kind, job, err)
	}
	return nil
}
