package ingest

import "testing"

func TestNamedSources(t *testing.T) {
	tests := []struct {
		paths []string
		want  string
	}{
		{[]string{"a.log"}, "1 source (a.log)"},
		{[]string{"a", "b", "c"}, "3 sources (a, b, c)"},
		{[]string{"a", "b", "c", "d", "e"}, "5 sources (a, b, c, d, e)"},
		{[]string{"a", "b", "c", "d", "e", "f", "g"}, "7 sources (a, b, c, d, e and 2 more)"},
	}
	for _, tt := range tests {
		if got := namedSources(tt.paths); got != tt.want {
			t.Errorf("namedSources(%q) = %q, want %q", tt.paths, got, tt.want)
		}
	}
}
