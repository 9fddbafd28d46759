package simulate

import (
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func digestDir(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = sha256.Sum256(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSameSeedSameBytes(t *testing.T) {
	a := digestDir(t, runScenario(t, "mixed", 42, 0.03, true))
	b := digestDir(t, runScenario(t, "mixed", 42, 0.03, true))
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("file sets differ: %d vs %d", len(a), len(b))
	}
	for name, h := range a {
		if b[name] != h {
			t.Errorf("%s differs between runs with the same seed", name)
		}
	}
	c := digestDir(t, runScenario(t, "mixed", 43, 0.03, true))
	if c["gateway-0.jsonl"] == a["gateway-0.jsonl"] {
		t.Error("different seeds produced the same gateway log")
	}
}
