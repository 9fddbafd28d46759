package deploy

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/kvtrail/kvtrail/internal/sqlcheck"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

type dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Title      string `json:"title"`
	Datasource dsRef  `json:"datasource"`
	Targets    []struct {
		RefID      string `json:"refId"`
		Datasource dsRef  `json:"datasource"`
		Expr       string `json:"expr"`
		RawSQL     string `json:"rawSql"`
	} `json:"targets"`
}

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// provisioned reads every datasource Grafana is given, by uid and type.
func provisioned(t *testing.T) map[string]string {
	t.Helper()
	files, _ := filepath.Glob("grafana/provisioning/datasources/*.yaml")
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Datasources []struct {
				UID  string `yaml:"uid"`
				Type string `yaml:"type"`
			} `yaml:"datasources"`
		}
		if err := yaml.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, d := range p.Datasources {
			if d.UID != "" {
				out[d.UID] = d.Type
			}
		}
	}
	return out
}

// grafanaMacros turns the ClickHouse plugin's macros into plain SQL over
// all time, as the plugin would for a very wide dashboard range.
func grafanaMacros(sql string) string {
	return regexp.MustCompile(`\$__timeFilter\(([a-z_]+)\)`).ReplaceAllString(sql,
		"$1 >= toDateTime('1971-01-01 00:00:00') AND $1 <= now()")
}

// metricNames are the kvtrail_* metrics the Go code registers.
func metricNames(t *testing.T) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(`"(kvtrail_[a-z_]+)"`)
	out := map[string]bool{}
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && p != ".." {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range re.FindAllSubmatch(b, -1) {
				out[string(m[1])] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGrafanaDashboards checks every provisioned dashboard: well-formed
// JSON with a unique uid, every panel's datasource provisioned, every
// Prometheus expression naming metrics kvtrail registers, and every
// ClickHouse query parsing under the modern grammar and running against
// kvtrail's schema on the test server.
func TestGrafanaDashboards(t *testing.T) {
	ds := provisioned(t)
	if ds["kvtrail-prometheus"] != "prometheus" || ds["kvtrail-clickhouse"] != "grafana-clickhouse-datasource" {
		t.Fatalf("datasources provisioned: %v", ds)
	}
	files, _ := filepath.Glob("grafana/dashboards/*.json")
	if len(files) < 2 {
		t.Fatalf("dashboards: %v", files)
	}
	metrics := metricNames(t)
	db := testdb.New(t)
	ctx := context.Background()
	uids := map[string]bool{}
	chQueries := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		dec := json.NewDecoder(strings.NewReader(string(b)))
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.UID == "" || uids[d.UID] || len(d.Panels) == 0 {
			t.Fatalf("%s: uid %q (duplicate %v), %d panels", f, d.UID, uids[d.UID], len(d.Panels))
		}
		uids[d.UID] = true
		for _, p := range d.Panels {
			if ds[p.Datasource.UID] != p.Datasource.Type {
				t.Errorf("%s panel %q: datasource %+v is not provisioned", f, p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s panel %q has no query", f, p.Title)
			}
			for _, q := range p.Targets {
				if q.Datasource.UID != p.Datasource.UID {
					t.Errorf("%s panel %q target %s: datasource %s differs from the panel's", f, p.Title, q.RefID, q.Datasource.UID)
				}
				switch p.Datasource.Type {
				case "prometheus":
					for _, m := range regexp.MustCompile(`kvtrail_[a-z_]+`).FindAllString(q.Expr, -1) {
						base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
						if !metrics[base] {
							t.Errorf("%s panel %q: %s is not a metric kvtrail registers", f, p.Title, m)
						}
					}
				case "grafana-clickhouse-datasource":
					chQueries++
					sql := grafanaMacros(q.RawSQL)
					if strings.Contains(sql, "$__") {
						t.Errorf("%s panel %q: unknown macro in %s", f, p.Title, q.RawSQL)
						continue
					}
					if err := sqlcheck.Check(sql); err != nil {
						t.Errorf("%s panel %q: %v", f, p.Title, err)
					}
					rows, err := db.Query(ctx, sql)
					if err != nil {
						t.Errorf("%s panel %q: %v\n%s", f, p.Title, err, sql)
						continue
					}
					if len(rows.Columns()) < 2 || rows.Columns()[0] != "time" {
						t.Errorf("%s panel %q: columns %v, want time first", f, p.Title, rows.Columns())
					}
					rows.Close()
				}
			}
		}
	}
	if chQueries < 5 {
		t.Fatalf("only %d ClickHouse queries checked", chQueries)
	}
}
