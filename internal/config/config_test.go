package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr []string
	}{
		{"ok with address", func(c *Config) { c.ClickHouse.Addr = "127.0.0.1:9000, ch2:9000" }, nil},
		{"bad address", func(c *Config) { c.ClickHouse.Addr = "127.0.0.1" }, []string{`clickhouse.addr: "127.0.0.1" is not host:port`}},
		{"bad port", func(c *Config) { c.ClickHouse.Addr = "h:99999" }, []string{"clickhouse.addr", "out of range"}},
		{"bad database", func(c *Config) { c.ClickHouse.Database = "kv-trail; DROP" }, []string{"clickhouse.database"}},
		{"empty database", func(c *Config) { c.ClickHouse.Database = "" }, []string{"clickhouse.database"}},
		{"short read timeout", func(c *Config) { c.ClickHouse.ReadTimeout = time.Second }, []string{"clickhouse.read_timeout: must be at least 2s"}},
		{"conns", func(c *Config) { c.ClickHouse.MaxOpenConns = 0 }, []string{"clickhouse.max_open_conns"}},
		{"compression", func(c *Config) { c.ClickHouse.Compression = "zstd" }, []string{"clickhouse.compression"}},
		{"managed needs binary", func(c *Config) { c.Local.Binary = "" }, []string{"local.binary"}},
		{"binary unused with address", func(c *Config) { c.ClickHouse.Addr = "h:9000"; c.Local.Binary = "" }, nil},
		{"serve addr", func(c *Config) { c.Serve.Addr = "8080" }, []string{"serve.addr"}},
		{"engine", func(c *Config) { c.ClickHouse.Engine = "sqlite" }, []string{"clickhouse.engine: must be server or embedded"}},
		{"embedded needs no binary", func(c *Config) { c.ClickHouse.Engine = EngineEmbedded; c.Local.Binary = "" }, nil},
		{"embedded with address", func(c *Config) { c.ClickHouse.Engine = EngineEmbedded; c.ClickHouse.Addr = "h:9000" },
			[]string{"clickhouse.addr: must be empty with clickhouse.engine embedded"}},
		{"embedded cluster", func(c *Config) { c.ClickHouse.Engine = EngineEmbedded; c.ClickHouse.Cluster = "c" },
			[]string{"clickhouse.cluster: must be empty with clickhouse.engine embedded"}},
		{"embedded dir", func(c *Config) { c.ClickHouse.Engine = EngineEmbedded; c.Local.EmbeddedDir = "" }, []string{"local.embedded_dir"}},
		{"level", func(c *Config) { c.Log.Level = "loud" }, []string{"log.level: must be debug, info, warn or error"}},
		{"format", func(c *Config) { c.Log.Format = "xml" }, []string{"log.format"}},
		{"all reported together", func(c *Config) { c.Log.Format = "xml"; c.Log.Level = "x"; c.ClickHouse.Username = "" },
			[]string{"log.format", "log.level", "clickhouse.username"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			err := c.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want error containing %q, got nil", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestSecretNeverPrints(t *testing.T) {
	c := Default()
	c.ClickHouse.Password = "hunter2"
	y, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"yaml": string(y), "json": string(j), "string": c.ClickHouse.Password.String()} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("%s output leaks the secret: %s", name, out)
		}
		if !strings.Contains(out, "secret") { // JSON escapes the angle brackets
			t.Errorf("%s output does not show the mask: %s", name, out)
		}
	}
	if c.ClickHouse.Password.Reveal() != "hunter2" {
		t.Error("Reveal lost the value")
	}
	if Secret("").String() != "" {
		t.Error("empty secret should print empty")
	}
}

func TestAddrs(t *testing.T) {
	c := ClickHouse{Addr: " a:1, ,b:2 "}
	got := c.Addrs()
	if len(got) != 2 || got[0] != "a:1" || got[1] != "b:2" || c.Managed() {
		t.Fatalf("Addrs() = %v", got)
	}
	if !(ClickHouse{}).Managed() {
		t.Fatal("empty addr must be managed")
	}
}
