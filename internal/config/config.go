// Package config holds kvtrail's typed configuration. It knows nothing about
// where values come from: cmd/kvtrail fills it from the YAML file, KVTRAIL_*
// environment variables and flags (viper stays there), then calls Validate.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// Config is the whole effective configuration. The mapstructure tags are the
// keys of kvtrail.yaml and, upper-cased with "_" for ".", of KVTRAIL_* env vars.
type Config struct {
	ClickHouse ClickHouse `mapstructure:"clickhouse" yaml:"clickhouse"`
	Local      Local      `mapstructure:"local" yaml:"local"`
	Serve      Serve      `mapstructure:"serve" yaml:"serve"`
	Log        Log        `mapstructure:"log" yaml:"log"`
	Ingest     Ingest     `mapstructure:"ingest" yaml:"ingest"`
	Analyze    Analyze    `mapstructure:"analyze" yaml:"analyze"`
	Auth       Auth       `mapstructure:"auth" yaml:"auth"`
	Alerts     Alerts     `mapstructure:"alerts" yaml:"alerts"`
	Retention  Retention  `mapstructure:"retention" yaml:"retention"`
	Probes     Probes     `mapstructure:"probes" yaml:"probes"`
	// MemoryLimit is the Go runtime's soft memory limit in bytes (as
	// GOMEMLIMIT, which wins when set) for ingest, serve and demo: the
	// garbage collector works harder near it, which keeps a bulk ingest's
	// RSS bounded. A bulk ingest reading lines collects only at it (GOGC
	// off unless the GOGC variable is set); serving commands keep GOGC.
	// Analysis commands, and the request linking after an ingest's lines,
	// run under analyze.memory_limit_mb instead. 0 disables it.
	MemoryLimit int64 `mapstructure:"memory_limit" yaml:"memory_limit"`
}

// ClickHouse says how to reach the server. An empty Addr means "start a
// private local server" (see Local).
type ClickHouse struct {
	// Addr is a comma-separated list of host:port native-protocol endpoints.
	Addr         string        `mapstructure:"addr" yaml:"addr"`
	Database     string        `mapstructure:"database" yaml:"database"`
	Username     string        `mapstructure:"username" yaml:"username"`
	Password     Secret        `mapstructure:"password" yaml:"password"`
	DialTimeout  time.Duration `mapstructure:"dial_timeout" yaml:"dial_timeout"`
	ReadTimeout  time.Duration `mapstructure:"read_timeout" yaml:"read_timeout"`
	MaxOpenConns int           `mapstructure:"max_open_conns" yaml:"max_open_conns"`
	// Cluster mode (cluster.go): the remote_servers cluster name, the
	// servers' macro names and the insert quorum.
	Cluster      string `mapstructure:"cluster" yaml:"cluster"`
	ShardMacro   string `mapstructure:"shard_macro" yaml:"shard_macro"`
	ReplicaMacro string `mapstructure:"replica_macro" yaml:"replica_macro"`
	InsertQuorum int    `mapstructure:"insert_quorum" yaml:"insert_quorum"`
	// Compression of data on the wire: auto (none on loopback, else lz4),
	// lz4 or none.
	Compression string `mapstructure:"compression" yaml:"compression"`
	// Engine is "server" (a ClickHouse server: Addr, or the managed one)
	// or "embedded" (ClickHouse 26.7 inside the kvtrail process, data in
	// Local.EmbeddedDir; docs/clickhouse.md, "The embedded engine").
	Engine string `mapstructure:"engine" yaml:"engine"`
}

// Engines kvtrail runs on (clickhouse.engine).
const (
	EngineServer   = "server"
	EngineEmbedded = "embedded"
)

// Embedded reports whether kvtrail runs ClickHouse in its own process.
func (c ClickHouse) Embedded() bool { return c.Engine == EngineEmbedded }

// Addrs splits Addr into its endpoints.
func (c ClickHouse) Addrs() []string {
	var out []string
	for _, a := range strings.Split(c.Addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Managed reports whether kvtrail must start its own ClickHouse server.
func (c ClickHouse) Managed() bool { return len(c.Addrs()) == 0 && !c.Embedded() }

// Local configures the managed clickhouse-server kvtrail starts when no
// address is configured.
type Local struct {
	// Binary is the clickhouse-server executable, looked up in PATH.
	Binary string `mapstructure:"binary" yaml:"binary"`
	// DataDir holds the server's data, config and logs; reused across runs.
	DataDir string `mapstructure:"data_dir" yaml:"data_dir"`
	// StartTimeout bounds the wait for the server to answer.
	StartTimeout time.Duration `mapstructure:"start_timeout" yaml:"start_timeout"`
	// EmbeddedDir holds the embedded engine's data (clickhouse.engine:
	// embedded); one kvtrail process uses it at a time.
	EmbeddedDir string `mapstructure:"embedded_dir" yaml:"embedded_dir"`
	// ChdbLibrary is the libchdb.so the embedded engine loads. Empty:
	// $CHDB_LIB_PATH, else .cache/chdb/<version>/libchdb.so of the
	// checkout (where scripts/demo.sh fetches it).
	ChdbLibrary string `mapstructure:"chdb_library" yaml:"chdb_library"`
}

// Serve configures the HTTP server.
type Serve struct {
	Addr            string        `mapstructure:"addr" yaml:"addr"`
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout" yaml:"shutdown_timeout"`
	// ExportDir holds notification-list exports (CSV, JSON, PDFs and
	// their manifests) until they are downloaded and archived.
	ExportDir string `mapstructure:"export_dir" yaml:"export_dir"`
}

// Log configures kvtrail's own logs (never customer log content).
type Log struct {
	Level  string `mapstructure:"level" yaml:"level"`
	Format string `mapstructure:"format" yaml:"format"`
}

// Default returns the configuration used when nothing else is set.
func Default() Config {
	return Config{
		ClickHouse: ClickHouse{
			Database:     "kvtrail",
			Username:     "default",
			DialTimeout:  5 * time.Second,
			ReadTimeout:  60 * time.Second,
			MaxOpenConns: 16,
			Compression:  "auto",
			ShardMacro:   "shard",
			ReplicaMacro: "replica",
			Engine:       EngineServer,
		},
		Local: Local{
			Binary:       "clickhouse-server",
			DataDir:      "./var/clickhouse",
			StartTimeout: 30 * time.Second,
			EmbeddedDir:  "./var/embedded",
		},
		Serve: Serve{
			Addr:            "127.0.0.1:8080",
			ShutdownTimeout: 10 * time.Second,
			ExportDir:       "./var/exports",
		},
		Log:       Log{Level: "info", Format: "text"},
		Ingest:    defaultIngest(),
		Analyze:   defaultAnalyze(),
		Auth:      defaultAuth(),
		Alerts:    defaultAlerts(),
		Retention: defaultRetention(),
		Probes:    defaultProbes(),
		// Measured (ingest's TestIngestMemoryIsBounded, 256 MB of SGLang
		// logs): peak RSS 225 MB with this limit, 281 MB at 256 MiB and
		// ~600 MB without one.
		MemoryLimit: 192 << 20,
	}
}

// Validate reports every bad value at once, each with the key that holds it.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	for _, a := range c.ClickHouse.Addrs() {
		if err := checkHostPort(a); err != nil {
			bad("clickhouse.addr", "%q is not host:port: %v", a, err)
		}
	}
	if !validIdent(c.ClickHouse.Database) {
		bad("clickhouse.database", "%q must be a non-empty identifier of letters, digits and _, not starting with a digit", c.ClickHouse.Database)
	}
	if c.ClickHouse.Username == "" {
		bad("clickhouse.username", "must not be empty")
	}
	if c.ClickHouse.DialTimeout <= 0 {
		bad("clickhouse.dial_timeout", "must be positive, got %s", c.ClickHouse.DialTimeout)
	}
	// The driver turns a context deadline into max_execution_time only for
	// deadlines over 1 s; shorter read timeouts would orphan server queries.
	if c.ClickHouse.ReadTimeout < 2*time.Second {
		bad("clickhouse.read_timeout", "must be at least 2s, got %s", c.ClickHouse.ReadTimeout)
	}
	if c.ClickHouse.MaxOpenConns < 1 || c.ClickHouse.MaxOpenConns > 256 {
		bad("clickhouse.max_open_conns", "must be between 1 and 256, got %d", c.ClickHouse.MaxOpenConns)
	}
	switch c.ClickHouse.Compression {
	case "auto", "lz4", "none":
	default:
		bad("clickhouse.compression", "must be auto, lz4 or none, got %q", c.ClickHouse.Compression)
	}
	switch c.ClickHouse.Engine {
	case EngineServer:
	case EngineEmbedded:
		if c.ClickHouse.Addr != "" {
			bad("clickhouse.addr", "must be empty with clickhouse.engine embedded (the engine runs inside kvtrail), got %q", c.ClickHouse.Addr)
		}
		if c.ClickHouse.Cluster != "" {
			bad("clickhouse.cluster", "must be empty with clickhouse.engine embedded (one process, one machine)")
		}
		if c.Local.EmbeddedDir == "" {
			bad("local.embedded_dir", "must not be empty with clickhouse.engine embedded")
		}
	default:
		bad("clickhouse.engine", "must be server or embedded, got %q", c.ClickHouse.Engine)
	}
	if c.ClickHouse.Managed() {
		if c.Local.Binary == "" {
			bad("local.binary", "must name the clickhouse-server executable when clickhouse.addr is empty")
		}
		if c.Local.DataDir == "" {
			bad("local.data_dir", "must not be empty when clickhouse.addr is empty")
		}
		if c.Local.StartTimeout <= 0 {
			bad("local.start_timeout", "must be positive, got %s", c.Local.StartTimeout)
		}
	}
	if err := checkHostPort(c.Serve.Addr); err != nil {
		bad("serve.addr", "%q is not host:port: %v", c.Serve.Addr, err)
	}
	if c.Serve.ExportDir == "" {
		bad("serve.export_dir", "must not be empty")
	}
	if c.Serve.ShutdownTimeout <= 0 {
		bad("serve.shutdown_timeout", "must be positive, got %s", c.Serve.ShutdownTimeout)
	}
	if _, err := ParseLevel(c.Log.Level); err != nil {
		bad("log.level", "%v", err)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", "must be text or json, got %q", c.Log.Format)
	}
	errs = append(errs, c.ClickHouse.validateCluster()...)
	errs = append(errs, c.Retention.validate()...)
	errs = append(errs, c.Ingest.validate()...)
	errs = append(errs, c.Analyze.validate()...)
	errs = append(errs, c.Auth.validate()...)
	errs = append(errs, c.Alerts.validate()...)
	errs = append(errs, c.Probes.validate()...)
	if c.MemoryLimit != 0 && c.MemoryLimit < 64<<20 {
		errs = append(errs, fmt.Errorf("memory_limit: must be 0 (off) or at least 64 MiB, got %d", c.MemoryLimit))
	}
	return errors.Join(errs...)
}

// ParseLevel maps a level name to slog's level.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("must be debug, info, warn or error, got %q", s)
}

func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q out of range", port)
	}
	return nil
}

func validIdent(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
