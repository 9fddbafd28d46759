package promimport

import (
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: "2026-11-28T09:30:00Z", want: time.Date(2026, 11, 28, 9, 30, 0, 0, time.UTC)},
		{in: "2026-11-28T10:30:00+01:00", want: time.Date(2026, 11, 28, 9, 30, 0, 0, time.UTC)},
		{in: "2026-11-28T09:30:00.250Z", want: time.Date(2026, 11, 28, 9, 30, 0, 250e6, time.UTC)},
		{in: "1795824000", want: time.Unix(1795824000, 0).UTC()},
		{in: "1795824000.5", want: time.Unix(1795824000, 500e6).UTC()},
		{in: "1795824000000", bad: true}, // milliseconds: refused, not year 58000
		{in: "yesterday", bad: true},
		{in: "", bad: true},
		{in: "NaN", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("ParseTime(%q) = %v, want error", tt.in, got)
			}
			continue
		}
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in   string
		want Target
		bad  bool
	}{
		{in: "prefill-0=http://10.0.1.1:30000/metrics", want: Target{"prefill-0", "http://10.0.1.1:30000/metrics"}},
		{in: "d=https://h/metrics?x=1", want: Target{"d", "https://h/metrics?x=1"}},
		{in: "http://10.0.1.1:30000/metrics", bad: true},
		{in: "=http://h/metrics", bad: true},
		{in: "n=10.0.1.1:30000", bad: true},
		{in: "n=ftp://h/metrics", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseTarget(tt.in)
		if (err != nil) != tt.bad || (!tt.bad && got != tt.want) {
			t.Errorf("ParseTarget(%q) = %+v, %v", tt.in, got, err)
		}
	}
}

func TestParseNodeMap(t *testing.T) {
	m, err := ParseNodeMap([]string{"10.0.1.1:30000=prefill-0", " 10.0.1.2:30000 = decode-0 "})
	if err != nil || m["10.0.1.1:30000"] != "prefill-0" || m["10.0.1.2:30000"] != "decode-0" {
		t.Fatalf("ParseNodeMap = %v, %v", m, err)
	}
	for _, bad := range [][]string{{"x"}, {"=n"}, {"a=1", "a=2"}} {
		if _, err := ParseNodeMap(bad); err == nil {
			t.Errorf("ParseNodeMap(%q): want error", bad)
		}
	}
}
