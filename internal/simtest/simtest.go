// Package simtest copies a simulated deployment's logs for tests that
// change them: the ways operators' logs differ from the simulator's (a
// router that reuses bootstrap rooms, clients that reuse request ids) are
// written as edits of a simulated day, and the test reads the result back
// with parsers of its own.
package simtest

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Rewrite copies the files under src to dst, each through edit (given its
// path relative to src), and returns dst.
func Rewrite(t testing.TB, src, dst string, edit func(rel string, b []byte) ([]byte, error)) string {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if b, err = edit(rel, b); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatalf("rewrite %s: %v", src, err)
	}
	return dst
}

// roomRe matches a bootstrap room as SGLang text lines (bootstrap_room=N)
// and JSON lines ("bootstrap_room": N) write it.
var roomRe = regexp.MustCompile(`bootstrap_room(": ?|=)[0-9]+`)

// OneRoom is an edit that gives every bootstrap room in SGLang text and
// JSON lines, and gateway JSON lines, the value 42: a router that derives
// rooms from a request id clients leave unset.
func OneRoom(_ string, b []byte) ([]byte, error) {
	return roomRe.ReplaceAll(b, []byte("bootstrap_room${1}42")), nil
}
