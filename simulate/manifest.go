package simulate

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"
)

// Manifest is sources.yaml, the file `kvtrail ingest --manifest` reads.
type Manifest struct {
	Sources []ManifestSource `yaml:"sources"`
}

// ManifestSource names one file (or glob) and how to read it.
type ManifestSource struct {
	Path        string   `yaml:"path"`
	Format      string   `yaml:"format"`
	Node        string   `yaml:"node"`
	Role        string   `yaml:"role"`
	Endpoints   []string `yaml:"endpoints,omitempty"`
	Timezone    string   `yaml:"timezone"`
	ClockOffset string   `yaml:"clock_offset"`
	Year        int      `yaml:"year,omitempty"`
}

func (s *sim) manifest() Manifest {
	var m Manifest
	year := s.sc.start.Year()
	for _, n := range s.nodes {
		eps := []string{n.url, n.bootstrapAddr()}
		off := time.Duration(-n.log.skew).String()
		m.Sources = append(m.Sources,
			ManifestSource{Path: n.log.rel, Format: "sglang", Node: n.name, Role: n.role.String(), Endpoints: eps, Timezone: "UTC", ClockOffset: off})
		if n.mc != nil && n.mc != n.log {
			m.Sources = append(m.Sources,
				ManifestSource{Path: n.mc.rel, Format: "mooncake", Node: n.name, Role: n.role.String(), Endpoints: eps, Timezone: "UTC", ClockOffset: off, Year: year})
		}
		if n.pe != nil {
			m.Sources = append(m.Sources,
				ManifestSource{Path: n.pe.rel, Format: "page-events", Node: n.name, Role: n.role.String(), Endpoints: eps, Timezone: "UTC", ClockOffset: off})
		}
		m.Sources = append(m.Sources,
			ManifestSource{Path: "metrics/" + n.name + "/*.prom", Format: "prometheus", Node: n.name, Role: n.role.String(), Endpoints: eps, Timezone: "UTC", ClockOffset: "0s"})
	}
	for i, g := range s.gws {
		m.Sources = append(m.Sources,
			ManifestSource{Path: g.rel, Format: "gateway", Node: gatewayName(i), Role: "gateway", Endpoints: []string{"http://" + gatewayIP + ":8000"}, Timezone: "UTC", ClockOffset: "0s"})
	}
	return m
}

func writeYAML(dir, name string, v any) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

func gatewayName(i int) string { return fmt.Sprintf("gw-%d", i) }
