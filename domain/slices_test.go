package domain

import (
	"reflect"
	"testing"
	"time"
)

func TestCutWindow(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	w := Window{From: t0, To: t0.Add(10 * time.Minute)}
	b := func(min int, n uint64) Bucket {
		return Bucket{Start: t0.Add(time.Duration(min) * time.Minute), N: n}
	}
	for _, tc := range []struct {
		name    string
		buckets []Bucket
		max     int
		want    []Window
	}{
		{"no data", nil, 10, []Window{w}},
		{"fits", []Bucket{b(0, 4), b(5, 6)}, 10, []Window{w}},
		{"reading whole asked", []Bucket{b(0, 40), b(5, 60)}, -1, []Window{w}},
		{"cut before the bucket that overflows", []Bucket{b(0, 4), b(1, 4), b(2, 4), b(7, 1)}, 10,
			[]Window{{From: t0, To: t0.Add(2 * time.Minute)}, {From: t0.Add(2 * time.Minute), To: w.To}}},
		{"a bucket over the limit is a slice of its own", []Bucket{b(0, 2), b(3, 50), b(4, 2)}, 10,
			[]Window{{From: t0, To: t0.Add(3 * time.Minute)}, {From: t0.Add(3 * time.Minute), To: t0.Add(4 * time.Minute)},
				{From: t0.Add(4 * time.Minute), To: w.To}}},
		{"first bucket over the limit starts at the window", []Bucket{b(0, 50), b(1, 50)}, 10,
			[]Window{{From: t0, To: t0.Add(time.Minute)}, {From: t0.Add(time.Minute), To: w.To}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CutWindow(tc.buckets, w, tc.max)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("CutWindow = %v, want %v", got, tc.want)
			}
		})
	}
}
