package config

import (
	"fmt"
	"time"
)

// Ingest configures the HTTP ingest endpoints of `kvtrail serve` and the
// spool that keeps accepted pushes while ClickHouse is unreachable.
type Ingest struct {
	// SpoolDir holds pushes accepted while ClickHouse was down.
	SpoolDir string `mapstructure:"spool_dir" yaml:"spool_dir"`
	// SpoolMaxBytes bounds the spool; beyond it pushes get 503.
	SpoolMaxBytes int64 `mapstructure:"spool_max_bytes" yaml:"spool_max_bytes"`
	// MaxBodyBytes bounds a compressed push body.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes" yaml:"max_body_bytes"`
	// MaxDecompressedBytes bounds a push body after decompression.
	MaxDecompressedBytes int64 `mapstructure:"max_decompressed_bytes" yaml:"max_decompressed_bytes"`
	// FlushInterval is how often buffered pushed lines are written.
	FlushInterval time.Duration `mapstructure:"flush_interval" yaml:"flush_interval"`
	// RequireToken makes every push carry an API token of role ingester
	// or admin (bearer, or basic auth password). Turning it off accepts
	// anonymous pushes: only for a serve bound to loopback.
	RequireToken bool `mapstructure:"require_token" yaml:"require_token"`
	// MaxInflightBytes bounds the decompressed push bytes held at once
	// across all requests; beyond it pushes get 503 with Retry-After. 0
	// means the larger of max_decompressed_bytes and half of memory_limit.
	MaxInflightBytes int64 `mapstructure:"max_inflight_bytes" yaml:"max_inflight_bytes"`
}

func defaultIngest() Ingest {
	return Ingest{
		SpoolDir:             "./var/spool",
		SpoolMaxBytes:        1 << 30,
		MaxBodyBytes:         10 << 20,
		MaxDecompressedBytes: 100 << 20,
		FlushInterval:        time.Second,
		RequireToken:         true,
	}
}

func (c Ingest) validate() []error {
	var errs []error
	if c.SpoolDir == "" {
		errs = append(errs, fmt.Errorf("ingest.spool_dir: must not be empty"))
	}
	if c.SpoolMaxBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("ingest.spool_max_bytes: must be at least 1 MiB, got %d", c.SpoolMaxBytes))
	}
	if c.MaxBodyBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("ingest.max_body_bytes: must be at least 1 KiB, got %d", c.MaxBodyBytes))
	}
	if c.MaxDecompressedBytes < c.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("ingest.max_decompressed_bytes: must be at least ingest.max_body_bytes (%d), got %d", c.MaxBodyBytes, c.MaxDecompressedBytes))
	}
	if c.MaxInflightBytes != 0 && c.MaxInflightBytes < c.MaxDecompressedBytes {
		errs = append(errs, fmt.Errorf("ingest.max_inflight_bytes: must be 0 (derived) or at least ingest.max_decompressed_bytes (%d), got %d", c.MaxDecompressedBytes, c.MaxInflightBytes))
	}
	if c.FlushInterval <= 0 || c.FlushInterval > time.Minute {
		errs = append(errs, fmt.Errorf("ingest.flush_interval: must be between 0 and 1m, got %s", c.FlushInterval))
	}
	return errs
}
