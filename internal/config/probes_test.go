package config

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestProbeKeysMaskedAndValidated(t *testing.T) {
	c := Default()
	c.Probes.Enabled = true
	c.Probes.Endpoint = "http://gateway:8000"
	c.Probes.Identities = []ProbeIdentity{{Name: "canary-a", APIKey: "sk-aaaa-secret"}, {Name: "canary-b", APIKey: "sk-bbbb-secret"}}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid probes config rejected: %v", err)
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "sk-aaaa") || !strings.Contains(string(b), "canary-b") {
		t.Errorf("config print shows a probe key or lost the identity:\n%s", b)
	}
	for name, mod := range map[string]func(*Probes){
		"one identity":    func(p *Probes) { p.Identities = p.Identities[:1] },
		"repeated name":   func(p *Probes) { p.Identities[1].Name = "canary-a" },
		"no endpoint":     func(p *Probes) { p.Endpoint = "" },
		"bad endpoint":    func(p *Probes) { p.Endpoint = "gateway:8000" },
		"zero budget":     func(p *Probes) { p.PerHour = 0 },
		"tiny timeout":    func(p *Probes) { p.Timeout = 0 },
		"zero margin":     func(p *Probes) { p.Margin = 0 },
		"zero max tokens": func(p *Probes) { p.MaxTokens = 0 },
	} {
		bad := c
		bad.Probes.Identities = append([]ProbeIdentity(nil), c.Probes.Identities...)
		mod(&bad.Probes)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "probes.") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
