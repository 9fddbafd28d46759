// Package ingest turns log and metric sources into ClickHouse rows: every
// record into raw_lines (the evidence), and what the parsers understand into
// the typed tables. It is idempotent (the same bytes give the same keys,
// whichever file they arrive in), resumable (a checkpoint per source in
// file_checkpoints, reported in ingest_sources) and bounded in memory.
package ingest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// FormatAuto asks the pipeline to detect a source's format.
const FormatAuto parse.Format = "auto"

// formatAliases are the short names the manifest and --format accept.
var formatAliases = map[string]parse.Format{
	"mooncake": parse.FormatGlog,
	"glog":     parse.FormatGlog,
	"gateway":  parse.FormatGateway,
	"":         FormatAuto,
}

// NormalizeFormat maps a user-facing format name to the parser's.
func NormalizeFormat(name string) parse.Format {
	if f, ok := formatAliases[strings.ToLower(name)]; ok {
		return f
	}
	return parse.Format(strings.ToLower(name))
}

// Roles a source may have.
var Roles = []string{"prefill", "decode", "gateway", "unified", "mooncake", "metrics"}

// Source is one input: a file path ("-" for stdin) with its identity.
type Source struct {
	Path   string
	Format parse.Format
	Node   string
	Role   string
	// Endpoints are the addresses gateway logs and bootstrap_host use for
	// this node (http://10.0.0.11:30000, 10.0.0.11:8998).
	Endpoints   []string
	Location    *time.Location
	ClockOffset time.Duration
	Year        int
	Gateway     *parse.GatewayMapping
}

// Validate reports a clear error for each bad field.
func (s Source) Validate() error {
	var errs []error
	if s.Path == "" {
		errs = append(errs, errors.New("path is empty"))
	}
	if s.Node == "" {
		errs = append(errs, fmt.Errorf("%s: node is empty (name the host the log came from)", s.Path))
	}
	if s.Role != "" && !contains(Roles, s.Role) {
		errs = append(errs, fmt.Errorf("%s: role %q must be one of %s", s.Path, s.Role, strings.Join(Roles, ", ")))
	}
	if s.Format != FormatAuto && s.Format != "" {
		if _, err := parse.New(s.Format, parse.ParseOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("%s: format %q is unknown (auto, mooncake, gateway or one of %v)", s.Path, s.Format, parse.Formats))
		}
	}
	if s.Year != 0 && (s.Year < 2000 || s.Year > 2100) {
		errs = append(errs, fmt.Errorf("%s: year %d out of range", s.Path, s.Year))
	}
	return errors.Join(errs...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// manifestEntry is one entry of a sources manifest (docs/formats.md).
type manifestEntry struct {
	Path        string            `yaml:"path"`
	Format      string            `yaml:"format"`
	Node        string            `yaml:"node"`
	Role        string            `yaml:"role"`
	Endpoints   []string          `yaml:"endpoints"`
	Timezone    string            `yaml:"timezone"`
	ClockOffset string            `yaml:"clock_offset"`
	Year        int               `yaml:"year"`
	FieldMap    map[string]string `yaml:"field_map"`
	TimeFormat  string            `yaml:"time_format"`
	DurUnit     string            `yaml:"duration_unit"`
}

type manifest struct {
	Sources []manifestEntry `yaml:"sources"`
}

// LoadManifest reads a sources manifest and expands each entry's path
// (relative to the manifest's directory; a file, a directory walked
// recursively, or a glob) into Sources, in a stable order.
func LoadManifest(path string) ([]Source, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	var m manifest
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	if len(m.Sources) == 0 {
		return nil, fmt.Errorf("manifest %s: no sources", path)
	}
	base := filepath.Dir(path)
	var out []Source
	var errs []error
	for i, e := range m.Sources {
		tmpl, err := e.source()
		if err != nil {
			errs = append(errs, fmt.Errorf("manifest %s: source %d (%s): %w", path, i+1, e.Path, err))
			continue
		}
		p := e.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		files, err := Expand(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("manifest %s: source %d: %w", path, i+1, err))
			continue
		}
		for _, f := range files {
			s := tmpl
			s.Path = f
			if err := s.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("manifest %s: source %d: %w", path, i+1, err))
				continue
			}
			out = append(out, s)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func (e manifestEntry) source() (Source, error) {
	s := Source{Path: e.Path, Format: NormalizeFormat(e.Format), Node: e.Node, Role: e.Role, Endpoints: e.Endpoints, Year: e.Year}
	loc, err := loadLocation(e.Timezone)
	if err != nil {
		return s, err
	}
	s.Location = loc
	if e.ClockOffset != "" {
		d, err := time.ParseDuration(e.ClockOffset)
		if err != nil {
			return s, fmt.Errorf("clock_offset %q: %w", e.ClockOffset, err)
		}
		s.ClockOffset = d
	}
	if len(e.FieldMap) > 0 || e.TimeFormat != "" || e.DurUnit != "" {
		s.Gateway = &parse.GatewayMapping{Fields: e.FieldMap, TimeFormat: e.TimeFormat, DurationUnit: e.DurUnit}
	}
	return s, nil
}

func loadLocation(name string) (*time.Location, error) {
	if name == "" || strings.EqualFold(name, "UTC") {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("timezone %q: %w", name, err)
	}
	return loc, nil
}

// Expand turns a path into the files it names: the file itself, every
// regular file under a directory (sorted), or the matches of a glob.
func Expand(p string) ([]string, error) {
	if p == "-" {
		return []string{"-"}, nil
	}
	if strings.ContainsAny(p, "*?[") {
		matches, err := filepath.Glob(p)
		if err != nil {
			return nil, fmt.Errorf("glob %q: %w", p, err)
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("glob %q matches no file", p)
		}
		var out []string
		for _, m := range matches {
			files, err := Expand(m)
			if err != nil {
				return nil, err
			}
			out = append(out, files...)
		}
		return out, nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", p, err)
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	var out []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", p, err)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("directory %s holds no files", p)
	}
	return out, nil
}
