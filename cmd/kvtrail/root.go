package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"reflect"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/kvtrail/kvtrail/internal/chdbstore"
	"github.com/kvtrail/kvtrail/internal/config"
)

// app is the state shared by subcommands: the effective config and logger.
type app struct {
	v   *viper.Viper
	cfg config.Config
	log *slog.Logger
	// chAddrs are the ClickHouse endpoints in use (the managed server's
	// once started), for tools such as clickhouse-client.
	chAddrs []string
	// stopProfile ends the --cpuprofile profile, if one runs, and
	// stopHeapProfile the --heapprofile sampler.
	stopProfile     func()
	stopHeapProfile func() error
	// command is the running command's path ("kvtrail serve"), and
	// embedded the held embedded store (clickhouse.engine: embedded), so
	// that a serving process can record its URL for others (embedded.go).
	command  string
	embedded *chdbstore.Lock
}

// startCPUProfile profiles this process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// writeAllocProfile writes the allocations made so far (go tool pprof
// -sample_index=alloc_space) to path.
func writeAllocProfile(path string) error { return writeProfile("allocs", "memory profile", path) }

// writeProfile writes the named runtime profile to path, through a
// temporary file so a reader never sees half of one; what names the
// profile in errors.
func writeProfile(name, what, path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return os.Rename(tmp, path)
}

const flagKey = "kvtrail_config_key"

// bindFlag ties a flag to a config key, so flags override env and file.
func bindFlag(f *pflag.Flag, key string) {
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[flagKey] = []string{key}
}

func newRootCmd() *cobra.Command {
	a := &app{v: viper.New()}
	root := &cobra.Command{
		Use:           "kvtrail",
		Short:         "Forensics for KV-cache tenant-isolation incidents in disaggregated LLM serving",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if path, _ := cmd.Flags().GetString("cpuprofile"); path != "" {
				stop, err := startCPUProfile(path)
				if err != nil {
					return err
				}
				a.stopProfile = stop
			}
			if path, _ := cmd.Flags().GetString("heapprofile"); path != "" {
				stop, err := startPeakHeapProfile(path)
				if err != nil {
					return err
				}
				a.stopHeapProfile = stop
			}
			a.command = cmd.CommandPath()
			return a.load(cmd)
		},
		PersistentPostRunE: func(cmd *cobra.Command, _ []string) error {
			if a.stopProfile != nil {
				a.stopProfile()
			}
			if a.stopHeapProfile != nil {
				if err := a.stopHeapProfile(); err != nil {
					return err
				}
			}
			if path, _ := cmd.Flags().GetString("memprofile"); path != "" {
				return writeAllocProfile(path)
			}
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.String("config", "", "config file (default: ./kvtrail.yaml if present)")
	pf.String("clickhouse-addr", "", "ClickHouse native address(es), comma-separated; empty starts a private local server")
	bindFlag(pf.Lookup("clickhouse-addr"), "clickhouse.addr")
	pf.String("clickhouse-database", "", "ClickHouse database kvtrail owns")
	bindFlag(pf.Lookup("clickhouse-database"), "clickhouse.database")
	pf.String("data-dir", "", "data directory of the managed local ClickHouse")
	bindFlag(pf.Lookup("data-dir"), "local.data_dir")
	pf.String("engine", "", "ClickHouse engine: server (clickhouse.addr or a managed server) or embedded (in-process, data in local.embedded_dir)")
	bindFlag(pf.Lookup("engine"), "clickhouse.engine")
	pf.String("log-level", "", "debug, info, warn or error")
	bindFlag(pf.Lookup("log-level"), "log.level")
	// For whoever measures kvtrail (docs/architecture.md, "Measuring").
	pf.String("cpuprofile", "", "write a Go CPU profile of the command to this file")
	_ = pf.MarkHidden("cpuprofile")
	pf.String("memprofile", "", "write a Go allocation profile of the command to this file")
	_ = pf.MarkHidden("memprofile")
	pf.String("heapprofile", "", "write a Go heap profile taken near the command's peak heap to this file")
	_ = pf.MarkHidden("heapprofile")

	root.AddCommand(newConfigCmd(a), newMigrateCmd(a), newServeCmd(a), newDemoCmd(a))
	for _, extra := range extraCommands {
		root.AddCommand(extra(a))
	}
	return root
}

// extraCommands lets subcommands that live in their own files register
// themselves without editing this list.
var extraCommands []func(*app) *cobra.Command

// load builds the effective config: defaults < file < KVTRAIL_* env < flags.
func (a *app) load(cmd *cobra.Command) error {
	v := a.v
	v.SetEnvPrefix("KVTRAIL")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	setDefaults(v, "", reflect.ValueOf(config.Default()))

	file, _ := cmd.Flags().GetString("config")
	switch {
	case file != "":
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return usageError{fmt.Errorf("read config %s: %w", file, err)}
		}
	default:
		if _, err := os.Stat("kvtrail.yaml"); err == nil {
			v.SetConfigFile("kvtrail.yaml")
			if err := v.ReadInConfig(); err != nil {
				return usageError{fmt.Errorf("read config kvtrail.yaml: %w", err)}
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("stat kvtrail.yaml: %w", err)
		}
	}
	var bindErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if keys := f.Annotations[flagKey]; len(keys) == 1 && f.Changed {
			if err := v.BindPFlag(keys[0], f); err != nil {
				bindErr = err
			}
		}
	})
	if bindErr != nil {
		return bindErr
	}
	var cfg config.Config
	// UnmarshalExact: a misspelt key in kvtrail.yaml is an error, not a
	// silently ignored setting.
	if err := v.UnmarshalExact(&cfg); err != nil {
		return usageError{fmt.Errorf("config: %w", err)}
	}
	if err := cfg.Validate(); err != nil {
		return usageError{fmt.Errorf("invalid config:\n%w", err)}
	}
	a.cfg = cfg
	level, _ := config.ParseLevel(cfg.Log.Level)
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		a.log = slog.New(slog.NewJSONHandler(os.Stderr, opts))
	} else {
		a.log = slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return nil
}

// setDefaults registers every field of the default config with viper, so
// that AutomaticEnv knows each key (viper only consults the environment for
// keys it has heard of).
func setDefaults(v *viper.Viper, prefix string, rv reflect.Value) {
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		key := f.Tag.Get("mapstructure")
		if key == "" {
			continue
		}
		if prefix != "" {
			key = prefix + "." + key
		}
		if f.Type.Kind() == reflect.Struct {
			setDefaults(v, key, rv.Field(i))
			continue
		}
		v.SetDefault(key, rv.Field(i).Interface())
	}
}
