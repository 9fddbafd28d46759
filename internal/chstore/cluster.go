package chstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Host is one server of the cluster, as the connected server's
// system.clusters lists it.
type Host struct {
	Shard, Replica uint32
	Name           string // host_name from remote_servers
	Port           uint16 // native port
}

// Addr is the host's native endpoint.
func (h Host) Addr() string { return net.JoinHostPort(h.Name, strconv.Itoa(int(h.Port))) }

func (h Host) String() string {
	return fmt.Sprintf("shard %d replica %d (%s)", h.Shard, h.Replica, h.Addr())
}

// createClusterDatabase creates the database on every reachable host of
// the cluster, one host at a time.
func (s *Store) createClusterDatabase(ctx context.Context, db string) error {
	var n uint64
	s.see("SELECT count() FROM system.clusters WHERE cluster = ?")
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.clusters WHERE cluster = ?", s.opts.Cluster).Scan(&n); err != nil {
		return fmt.Errorf("read system.clusters: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("cluster %q is not in the server's remote_servers (clickhouse.cluster)", s.opts.Cluster)
	}
	// Not ON CLUSTER: two kvtrail processes creating the database ON
	// CLUSTER at the same moment crashed a ClickHouse 18.16 server (seen
	// in TestClusterMigrateAndStatus: the connection ends with EOF), and
	// ON CLUSTER waits for hosts that are down. A plain CREATE DATABASE
	// IF NOT EXISTS on each reachable host is safe to race and cheap, so
	// every start repairs a host that was down the last time.
	hosts, err := s.Hosts(ctx)
	if err != nil {
		return err
	}
	q := "CREATE DATABASE IF NOT EXISTS " + quoteIdent(db)
	var reached int
	var lastErr error
	for _, h := range hosts {
		o := s.opts.oneHost(h.Addr())
		o.OnStatement = nil
		hs, err := dial(ctx, o, "default")
		if err != nil {
			lastErr = err
			continue
		}
		s.see(q)
		err = hs.conn.Exec(ctx, q)
		_ = hs.Close()
		if err != nil {
			return fmt.Errorf("create database on %s: %w", h.Addr(), err)
		}
		reached++
	}
	if reached == 0 {
		return fmt.Errorf("no host of cluster %q reachable: %w", s.opts.Cluster, lastErr)
	}
	return nil
}

// Hosts lists the cluster's servers, by shard and replica. It is empty for
// a single server.
func (s *Store) Hosts(ctx context.Context) ([]Host, error) {
	if s.opts.Cluster == "" {
		return nil, nil
	}
	rows, err := s.Query(ctx, `SELECT shard_num, replica_num, host_name, port FROM system.clusters
WHERE cluster = ? ORDER BY shard_num, replica_num`, s.opts.Cluster)
	if err != nil {
		return nil, fmt.Errorf("read system.clusters: %w", err)
	}
	defer rows.Close()
	var out []Host
	for rows.Next() {
		var h Host
		if err := rows.Scan(&h.Shard, &h.Replica, &h.Name, &h.Port); err != nil {
			return nil, fmt.Errorf("scan system.clusters: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cluster %q is not in the server's remote_servers (clickhouse.cluster)", s.opts.Cluster)
	}
	return out, nil
}

// oneHost is o for a single-server connection to addr alone: statements
// run on that host only, one at a time.
func (o Options) oneHost(addr string) Options {
	o.Addrs, o.Cluster, o.MaxOpenConns = []string{addr}, "", 1
	return o
}

// OpenHost connects to one host of the cluster with the store's
// credentials, bound to the same database, as a single-server store (no
// cluster settings: statements run on that host only).
func (s *Store) OpenHost(ctx context.Context, h Host, timeout time.Duration) (*Store, error) {
	o := s.opts.oneHost(h.Addr())
	if timeout > 0 {
		o.DialTimeout = timeout
	}
	return dial(ctx, o, s.db)
}

// HostHealth is whether kvtrail reached one host.
type HostHealth struct {
	Host
	Err error
}

// PingHosts dials and pings every host of the cluster in parallel.
func (s *Store) PingHosts(ctx context.Context, timeout time.Duration) ([]HostHealth, error) {
	hosts, err := s.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]HostHealth, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].Host = h
			hs, err := s.OpenHost(ctx, h, timeout)
			if err != nil {
				out[i].Err = err
				return
			}
			_ = hs.Close()
		}()
	}
	wg.Wait()
	return out, nil
}

// ErrShardDown means every replica of some shard is unreachable: reads of
// the Distributed tables fail and inserts cannot be acknowledged.
var ErrShardDown = errors.New("shard unreachable")

// PingShards is readiness in cluster mode. It returns the unreachable hosts
// (a down replica degrades but does not stop kvtrail) and an error wrapping
// ErrShardDown when a whole shard is unreachable. On a single server it is
// Ping.
func (s *Store) PingShards(ctx context.Context) ([]string, error) {
	if s.opts.Cluster == "" {
		return nil, s.Ping(ctx)
	}
	health, err := s.PingHosts(ctx, time.Second)
	if err != nil {
		return nil, err
	}
	var down []string
	alive := map[uint32]bool{}
	shards := map[uint32]bool{}
	for _, h := range health {
		shards[h.Shard] = true
		if h.Err != nil {
			down = append(down, fmt.Sprintf("%s: %v", h.Host, h.Err))
			continue
		}
		alive[h.Shard] = true
	}
	var dead []string
	for sh := range shards {
		if !alive[sh] {
			dead = append(dead, strconv.Itoa(int(sh)))
		}
	}
	sort.Strings(dead)
	if len(dead) > 0 {
		return down, fmt.Errorf("%w: no replica of shard %s answers", ErrShardDown, strings.Join(dead, ", "))
	}
	return down, nil
}

// Where a host stands in its shard, as firstReplicasFirst ranks it: a
// process connected to a rankFirst host reads at once what it wrote.
const (
	rankFirst       = iota // the first replica of its shard, or a replica of none
	rankUnknown            // a replica whose entry in remote_servers was not told apart
	rankLater              // a later replica of its shard
	rankUnreachable        // not reached: kept last, for failover
)

// firstReplicasFirst orders the addresses so that kvtrail connects to a
// host that is the first replica of its shard (or of none), keeping the
// configured order among equals. A synchronous Distributed insert on 18.16
// writes the connected host's own shard to that host, whatever
// prefer_localhost_replica says, while reads (prefer_localhost_replica=0,
// load_balancing=in_order) go to each shard's first live replica.
// Connected to a later replica, a process wrote its own shard's rows where
// it did not read them, and read them only once the first replica had
// fetched them: measured on the 2 × 2 test cluster, a read right after an
// insert missed up to all of its own shard's rows. Connected to a first
// replica, the writes to its shard and the reads go to the same host.
// Each address is dialled once, in parallel; the order is logged when it
// changed.
func firstReplicasFirst(ctx context.Context, o Options) []string {
	ranks := make([]int, len(o.Addrs))
	var wg sync.WaitGroup
	for i, a := range o.Addrs {
		wg.Go(func() { ranks[i] = replicaRank(ctx, o, a) })
	}
	wg.Wait()
	out := orderByRank(o.Addrs, ranks)
	if !slices.Equal(out, o.Addrs) {
		slog.Info("connecting to a first replica of its shard first: a process reads at once what it wrote",
			"addrs", strings.Join(out, ","))
	}
	if slices.Min(ranks) == rankLater {
		slog.Warn("no configured address is a shard's first replica: on ClickHouse 18.16 kvtrail may not read at once "+
			"what it just wrote to the connected host's shard; list a first replica in clickhouse.addrs (docs/cluster.md)",
			"addrs", strings.Join(o.Addrs, ","))
	}
	return out
}

// replicaRank dials addr alone and finds it in its system.clusters: the
// entry of its own shard (is_local, which 18.16 sets on every replica of
// the shard) with addr's port and host, by name or resolved address.
func replicaRank(ctx context.Context, o Options, addr string) int {
	cluster := o.Cluster
	o = o.oneHost(addr)
	o.RowReads = true // no block path for one question
	s, err := dial(ctx, o, "default")
	if err != nil {
		return rankUnreachable
	}
	defer func() { _ = s.Close() }()
	var entries []struct {
		Replica uint32 `ch:"replica_num"`
		Name    string `ch:"host_name"`
		Address string `ch:"host_address"`
		Port    uint16 `ch:"port"`
	}
	if err := s.Select(ctx, &entries, `SELECT replica_num, host_name, host_address, port FROM system.clusters
WHERE cluster = ? AND is_local = 1`, cluster); err != nil {
		return rankUnreachable
	}
	if len(entries) == 0 {
		return rankFirst // no shard's replica: it writes every shard where it reads
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, "9000"
	}
	ips, _ := net.DefaultResolver.LookupHost(ctx, host)
	for _, e := range entries {
		if strconv.Itoa(int(e.Port)) != port || (e.Name != host && !slices.Contains(ips, e.Address)) {
			continue
		}
		if e.Replica == 1 {
			return rankFirst
		}
		return rankLater
	}
	return rankUnknown
}

// orderByRank is addrs stably sorted by rank.
func orderByRank(addrs []string, ranks []int) []string {
	idx := make([]int, len(addrs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return ranks[idx[a]] < ranks[idx[b]] })
	out := make([]string, len(addrs))
	for i, j := range idx {
		out[i] = addrs[j]
	}
	return out
}
