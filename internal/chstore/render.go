package chstore

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"
)

// Layout says how the schema is deployed. Every migration is written once and
// rendered for a layout, so single-node and cluster DDL cannot drift apart.
type Layout struct {
	// Database the tables live in.
	Database string
	// Cluster is the ClickHouse cluster name; empty for a single server.
	Cluster string
	// ShardMacro and ReplicaMacro are the macro names in the Replicated
	// engines' ZooKeeper path and replica name (default shard, replica).
	ShardMacro, ReplicaMacro string
	// Version of the server the DDL is for (zero value: render portably).
	Version Version
}

// local is the table that holds t's rows, which an ALTER or a read of
// system.parts names: t's _local table on a cluster, where t is the
// Distributed table.
func (l Layout) local(t string) string {
	if l.Cluster != "" {
		return t + "_local"
	}
	return t
}

// onCluster is the clause that sends a DDL to every host of the cluster
// ("" on a single server).
func (l Layout) onCluster() string {
	if l.Cluster != "" {
		return " ON CLUSTER " + l.Cluster
	}
	return ""
}

// system is where a system table of every host is read: system.name, or
// the cluster() table function over it.
func (l Layout) system(name string) string {
	if l.Cluster != "" {
		return "cluster('" + l.Cluster + "', system, " + name + ")"
	}
	return "system." + name
}

func (l Layout) shardMacro() string {
	if l.ShardMacro == "" {
		return "shard"
	}
	return l.ShardMacro
}

func (l Layout) replicaMacro() string {
	if l.ReplicaMacro == "" {
		return "replica"
	}
	return l.ReplicaMacro
}

// ModernSince is the oldest server version that gets the modern schema
// rendering and TTL retention. The modern parts use DateTime64 and
// fromUnixTimestamp64Nano (20.x), TTL ... DELETE WHERE (21.x) and
// MATERIALIZE COLUMN (21.10), so 22.1 is the first release with all of
// them. CI runs the modern rendering on 26.7 (internal/chdbtier); users run
// 24.x and newer.
var ModernSince = Version{Major: 22, Minor: 1}

// Modern reports a server that gets the modern schema rendering
// ({{modern}} in migrations) and TTL retention: ModernSince or newer.
// Servers older than that (Debian's 18.16, and the unsupported 19.x to
// 21.x) get the portable rendering, which runs on every version.
func (v Version) Modern() bool {
	return v.Major > ModernSince.Major || (v.Major == ModernSince.Major && v.Minor >= ModernSince.Minor)
}

// Render turns a migration template into its statements for the layout.
//
// Template functions:
//
//	{{table "t"}}              db.t (single) or db.t_local (cluster)
//	{{on_cluster}}             "" or ON CLUSTER name
//	{{engine "t" "E(args)"}}   E(args), or ReplicatedE('/clickhouse/tables/{shard}/db/t_local', '{replica}', args)
//	{{distributed "t" "key"}}  "" or a CREATE of the Distributed table t over t_local
//	{{modern}}                 true when the target server is modern (Version.Modern: 22.1 or newer)
//	{{dist "t"}}               "" or db.t, the Distributed table over t_local
func Render(src string, l Layout) ([]string, error) {
	funcs := template.FuncMap{
		"table": func(name string) string {
			if l.Cluster != "" {
				return l.Database + "." + name + "_local"
			}
			return l.Database + "." + name
		},
		"on_cluster": func() string {
			if l.Cluster == "" {
				return ""
			}
			return "ON CLUSTER " + l.Cluster
		},
		"engine": func(table, engine string) (string, error) {
			if l.Cluster == "" {
				return engine, nil
			}
			name, args, _ := strings.Cut(engine, "(")
			args = strings.TrimSuffix(args, ")")
			path := fmt.Sprintf("'/clickhouse/tables/{%s}/%s/%s_local', '{%s}'", l.shardMacro(), l.Database, table, l.replicaMacro())
			if args != "" {
				path += ", " + args
			}
			return "Replicated" + name + "(" + path + ")", nil
		},
		"distributed": func(table, key string) string {
			if l.Cluster == "" {
				return ""
			}
			return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s ON CLUSTER %s AS %s.%s_local ENGINE = Distributed(%s, %s, %s_local, %s);",
				l.Database, table, l.Cluster, l.Database, table, l.Cluster, l.Database, table, key)
		},
		"modern": func() bool { return l.Version.Modern() },
		// dist names the Distributed table t on a cluster ("" otherwise),
		// for ALTERs that must reach it as well as t_local.
		"dist": func(table string) string {
			if l.Cluster == "" {
				return ""
			}
			return l.Database + "." + table
		},
	}
	t, err := template.New("migration").Funcs(funcs).Option("missingkey=error").Parse(src)
	if err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, nil); err != nil {
		return nil, fmt.Errorf("render template: %w", err)
	}
	return SplitStatements(buf.String()), nil
}

// SplitStatements splits SQL text on semicolons that end a line, dropping
// comment-only and empty statements. Migrations must not put ";" at the end
// of a line inside a string literal.
func SplitStatements(sql string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		stmt := strings.TrimSpace(stripComments(cur.String()))
		if stmt != "" {
			out = append(out, stmt)
		}
		cur.Reset()
	}
	for _, line := range strings.Split(sql, "\n") {
		trimmed := strings.TrimRight(line, " \t\r")
		if strings.HasSuffix(trimmed, ";") {
			cur.WriteString(strings.TrimSuffix(trimmed, ";"))
			cur.WriteByte('\n')
			flush()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	flush()
	return out
}

// stripComments removes whole-line "--" comments so statements sent to the
// server (and shown in errors) are just SQL.
func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}
