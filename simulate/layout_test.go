package simulate

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Mooncake's glog lines go into the engine's own stream by default, as a
// process started with 2>&1 writes them; MooncakeSeparate keeps the old
// two-file layout. Either way the same glog lines are written, and no
// memory figure is negative.
func TestMooncakeLayouts(t *testing.T) {
	count := func(dir string) (glog, engineGlog int, mcFiles []string, m Manifest) {
		files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, p := range files {
			mc := strings.HasSuffix(p, ".mooncake.log")
			if mc {
				mcFiles = append(mcFiles, filepath.Base(p))
			}
			forLines(t, p, func(_ int, l string) {
				if glogRe.MatchString(l) {
					glog++
					if !mc {
						engineGlog++
					}
				}
				checkNoNegativeMemory(t, p, l)
			})
		}
		data, err := os.ReadFile(filepath.Join(dir, "sources.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return
	}
	mixed := t.TempDir()
	if _, err := Run(context.Background(), Config{Scenario: "mixed", Seed: 3, Scale: 0.02, OutDir: mixed}); err != nil {
		t.Fatal(err)
	}
	sep := t.TempDir()
	if _, err := Run(context.Background(), Config{Scenario: "mixed", Seed: 3, Scale: 0.02, OutDir: sep, MooncakeSeparate: true}); err != nil {
		t.Fatal(err)
	}
	g1, e1, f1, m1 := count(mixed)
	g2, e2, f2, m2 := count(sep)
	if g1 == 0 || e1 != g1 || len(f1) != 0 {
		t.Errorf("default layout: %d glog lines, %d in engine logs, mooncake files %v", g1, e1, f1)
	}
	if g2 != g1 || e2 != 0 || len(f2) == 0 {
		t.Errorf("separate layout: %d glog lines (default %d), %d in engine logs, mooncake files %v", g2, g1, e2, f2)
	}
	for _, s := range m1.Sources {
		if s.Format == "mooncake" {
			t.Errorf("default manifest lists a mooncake source: %+v", s)
		}
	}
	n := 0
	for _, s := range m2.Sources {
		if s.Format == "mooncake" {
			n++
		}
	}
	if n != len(f2) {
		t.Errorf("separate manifest lists %d mooncake sources for %d files", n, len(f2))
	}
}

var memFigure = regexp.MustCompile(`(?:avail mem|avail_mem|available_gpu_mem|mem usage)=(-?[\d.]+) GB`)

func checkNoNegativeMemory(t *testing.T, path, line string) {
	t.Helper()
	for _, m := range memFigure.FindAllStringSubmatch(line, -1) {
		if v, err := strconv.ParseFloat(m[1], 64); err != nil || v < 0 {
			t.Errorf("%s: impossible memory figure %q in %q", filepath.Base(path), m[1], line)
		}
	}
}
