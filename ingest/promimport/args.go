package promimport

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseTime reads RFC 3339 ("2026-11-28T09:30:00Z", fractional seconds
// allowed) or unix seconds ("1795824000", "1795824000.5"), the two forms
// Prometheus' own API accepts.
func ParseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e11 {
		return time.Time{}, fmt.Errorf("time %q: want RFC 3339 (2026-11-28T09:30:00Z) or unix seconds", s)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(math.Round(frac*1e3))*1e6).UTC(), nil
}

// ParseNodeMap reads "from=to" pairs (e.g. "10.0.1.1:30000=prefill-0").
func ParseNodeMap(pairs []string) (map[string]string, error) {
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		from, to, ok := strings.Cut(p, "=")
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("node map %q: want label-value=node", p)
		}
		if prev, dup := m[from]; dup && prev != to {
			return nil, fmt.Errorf("node map: %q mapped to both %q and %q", from, prev, to)
		}
		m[from] = to
	}
	return m, nil
}
