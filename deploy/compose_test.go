package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func compose(t *testing.T, file string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		if os.Getenv("KVTRAIL_REQUIRE_CLICKHOUSE") == "1" { // CI: every tool is required
			t.Fatalf("docker-compose not installed: %v", err)
		}
		t.Skip("docker-compose not installed (apt-get install docker-compose)")
	}
	// Plain `config`, not `config -q`: v1's -q misses some type errors.
	cmd := exec.Command(bin, "-f", file, "config")
	cmd.Dir = filepath.Dir(file)
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix:///nonexistent")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestComposeFileValid(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := compose(t, filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, out)
	}
	var p struct {
		Services map[string]struct {
			Build *struct {
				Context    string `yaml:"context"`
				Dockerfile string `yaml:"dockerfile"`
			} `yaml:"build"`
			// v1 prints volumes in the short "source:target[:mode]" form.
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("parse normalized compose output: %v", err)
	}
	for _, want := range []string{"clickhouse", "kvtrail", "loki", "grafana"} {
		if _, ok := p.Services[want]; !ok {
			t.Errorf("service %s missing", want)
		}
	}
	// docker-compose config does not check that build contexts and bind
	// mounts exist; a user would find out at `up`. Check here.
	for name, s := range p.Services {
		if s.Build != nil {
			if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("service %s: Dockerfile: %v", name, err)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if filepath.IsAbs(src) { // a bind mount; named volumes have no slash
				if _, err := os.Stat(src); err != nil {
					t.Errorf("service %s: bind mount source: %v", name, err)
				}
			}
		}
	}
}

// The validator must be able to fail, or the test above proves nothing.
func TestComposeValidatorRejectsBrokenFile(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(b), "healthcheck:", "healthchek:", 1)
	f := filepath.Join(t.TempDir(), "docker-compose.yml")
	if err := os.WriteFile(f, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := compose(t, f)
	if err == nil || !strings.Contains(out, "healthchek") {
		t.Fatalf("broken compose file accepted: %v\n%s", err, out)
	}
}
