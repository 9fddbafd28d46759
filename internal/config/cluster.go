package config

import (
	"fmt"
	"time"
)

// validateCluster checks the cluster-mode keys of the clickhouse section.
func (c ClickHouse) validateCluster() []error {
	var errs []error
	if c.Cluster != "" && !validIdent(c.Cluster) {
		errs = append(errs, fmt.Errorf("clickhouse.cluster: %q must be an identifier of letters, digits and _", c.Cluster))
	}
	if c.Cluster != "" && c.Managed() {
		errs = append(errs, fmt.Errorf("clickhouse.cluster: needs clickhouse.addr (the managed local server is a single server)"))
	}
	if !validIdent(c.ShardMacro) {
		errs = append(errs, fmt.Errorf("clickhouse.shard_macro: %q must be a macro name of letters, digits and _", c.ShardMacro))
	}
	if !validIdent(c.ReplicaMacro) {
		errs = append(errs, fmt.Errorf("clickhouse.replica_macro: %q must be a macro name of letters, digits and _", c.ReplicaMacro))
	}
	if c.InsertQuorum < 0 || c.InsertQuorum > 16 {
		errs = append(errs, fmt.Errorf("clickhouse.insert_quorum: must be between 0 and 16, got %d", c.InsertQuorum))
	}
	return errs
}

// Retention says how long ingested log data is kept (docs/cluster.md,
// "Retention"). Cases under legal hold are never dropped.
type Retention struct {
	// Keep is how long ingested data is kept; 0 keeps everything.
	// `kvtrail retention` applies it (run it daily from cron).
	Keep time.Duration `mapstructure:"keep" yaml:"keep"`
}

func defaultRetention() Retention { return Retention{} }

func (r Retention) validate() []error {
	var errs []error
	if r.Keep != 0 && r.Keep < 7*24*time.Hour {
		// Partitions are weeks: less than a week would drop the current one.
		errs = append(errs, fmt.Errorf("retention.keep: must be 0 (keep everything) or at least 168h (one week), got %s", r.Keep))
	}
	return errs
}
