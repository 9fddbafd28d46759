// Package testcluster starts a real sharded, replicated ClickHouse cluster on
// loopback for tests: one ZooKeeper (Debian's zookeeper package, run in the
// foreground with java) and shards × replicas clickhouse-servers with
// generated configs, macros and a remote_servers entry. Every process dies
// with the test binary (Pdeathsig) and is stopped, in parallel, in
// t.Cleanup.
//
// When KVTRAIL_REQUIRE_CLICKHOUSE=1 (CI) a missing clickhouse-server, java or
// ZooKeeper fails the test; otherwise it is skipped with the reason.
package testcluster

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/internal/chlocal"
	"github.com/kvtrail/kvtrail/internal/freeport"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// ZooKeeperJar is where Debian's zookeeper package puts the server; its
// manifest Class-Path pulls in the other jars.
const ZooKeeperJar = "/usr/share/java/zookeeper.jar"

// Options sizes the cluster.
type Options struct {
	// Name is the cluster name in remote_servers (default "kvtrail").
	Name string
	// Shards and Replicas per shard (default 2 × 2).
	Shards, Replicas int
}

// Node is one clickhouse-server of the cluster.
type Node struct {
	Shard, Replica int
	// Addr is the native endpoint, fixed for the node's lifetime so that
	// clients and the other servers find it again after a restart.
	Addr string
	opts chlocal.Options

	mu  sync.Mutex
	srv *chlocal.Server
}

// Cluster is a running test cluster.
type Cluster struct {
	Name  string
	Nodes []*Node
	// ZooKeeperAddr is the ZooKeeper client endpoint.
	ZooKeeperAddr string
	zk            *exec.Cmd
	zkDone        <-chan struct{}
}

// Start brings up ZooKeeper and every server and waits until all answer.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Name == "" {
		o.Name = "kvtrail"
	}
	if o.Shards == 0 {
		o.Shards = 2
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	requireTools(t)
	dir := t.TempDir()
	c := &Cluster{Name: o.Name}
	t.Cleanup(c.stopAll)
	// Cleanups run last first: this one, before the servers stop. A
	// dropped connection under load ("read: EOF") says nothing of why;
	// the servers' logs, removed with the test's directory, do.
	t.Cleanup(func() {
		if t.Failed() {
			c.logTails(t)
		}
	})
	if err := c.startZooKeeper(filepath.Join(dir, "zk")); err != nil {
		t.Fatalf("start ZooKeeper: %v", err)
	}

	// A port found free can be taken before the server binds it (by
	// another test process's server; freeport keeps clear of the ports
	// outgoing connections use): the servers are then started again on
	// fresh ports, in fresh directories.
	for attempt := 1; ; attempt++ {
		err := c.startServers(o, dir, attempt)
		if err == nil {
			break
		}
		if attempt < 4 && strings.Contains(err.Error(), "Address already in use") {
			t.Logf("testcluster: %v; again on other ports", err)
			c.stopServers()
			continue
		}
		t.Fatal(err)
	}
	stop := c.watchDDLWorkers(t)
	t.Cleanup(stop) // runs before the servers stop (cleanups run last first)
	return c
}

// ddlWorkerEnded is how ClickHouse before 20.x logs the end of its DDL
// worker thread: on a ZooKeeper error it does not expect ("Unexpected
// ZooKeeper error: ... Terminating.") or any other ("Unexpected error,
// will terminate"), the thread returns and the server runs on without
// one until it restarts (ClickHouse PR 18285 made later versions start
// it again). Every ON CLUSTER statement then waits for that host until
// distributed_ddl_task_timeout. On 18.16 an ALTER ... ON CLUSTER of a
// replicated table ended it with "Node exists" on the shard's executed
// node (two replicas of a shard both ran it), in about one CI run of four.
const ddlWorkerEnded = "DDLWorker: Unexpected"

// ddlWatchEvery is how often the servers' error logs are read.
const ddlWatchEvery = time.Second

// watchDDLWorkers restarts a running server whose DDL worker has ended,
// as a modern server restarts the worker itself: the statements queued
// for the host run once it is back. It returns the function that stops
// watching.
func (c *Cluster) watchDDLWorkers(t testing.TB) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	read := make([]int64, len(c.Nodes)) // each error log's bytes already read
	for i, n := range c.Nodes {
		read[i] = fileSize(n.errLog())
	}
	go func() {
		defer close(exited)
		tick := time.NewTicker(ddlWatchEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for i, n := range c.Nodes {
				ended, size := logHas(n.errLog(), read[i], ddlWorkerEnded)
				read[i] = size
				if !ended {
					continue
				}
				restarted, err := n.restartIfRunning()
				if restarted {
					t.Logf("testcluster: %s: its DDL worker ended (%q in its error log); restarted it", n, ddlWorkerEnded)
				}
				if err != nil {
					t.Errorf("testcluster: restart %s after its DDL worker ended: %v", n, err)
				}
				read[i] = fileSize(n.errLog())
			}
		}
	}()
	return func() { close(done); <-exited }
}

func (n *Node) errLog() string { return filepath.Join(n.opts.Dir, "log", "server.err.log") }

// restartIfRunning stops and starts the node's server unless a test has
// stopped it (under one hold of the node, so a test's Stop is not undone).
func (n *Node) restartIfRunning() (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv == nil {
		return false, nil
	}
	n.srv.Stop()
	n.srv = nil
	srv, err := chlocal.Start(context.Background(), n.opts)
	if err != nil {
		return true, err
	}
	n.srv = srv
	return true, nil
}

func (n *Node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv != nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logHas reports whether path holds want after its first from bytes,
// and how long the file is now (a file shorter than from was rotated:
// it is read from its start).
func logHas(path string, from int64, want string) (bool, int64) {
	f, err := os.Open(path)
	if err != nil {
		return false, from
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, from
	}
	if fi.Size() < from {
		from = 0
	}
	if fi.Size() == from {
		return false, from
	}
	b := make([]byte, fi.Size()-from)
	n, _ := f.ReadAt(b, from)
	return strings.Contains(string(b[:n]), want), from + int64(n)
}

// portsPicked, when set (by a test), is called with the servers' native
// ports once startServers has picked them, before any server starts.
var portsPicked func(attempt int, tcp []int)

// startServers picks ports, writes the cluster's configuration and starts
// every server (attempt > 1: in its own directories).
func (c *Cluster) startServers(o Options, dir string, attempt int) error {
	if attempt > 1 {
		dir = filepath.Join(dir, fmt.Sprintf("attempt%d", attempt))
	}
	c.Nodes = nil
	type ports struct{ tcp, http, inter int }
	var ps []ports
	for i := 0; i < o.Shards*o.Replicas; i++ {
		p := ports{}
		for _, dst := range []*int{&p.tcp, &p.http, &p.inter} {
			n, err := freeport.Pick()
			if err != nil {
				return err
			}
			*dst = n
		}
		ps = append(ps, p)
	}
	if portsPicked != nil {
		tcp := make([]int, len(ps))
		for i, p := range ps {
			tcp[i] = p.tcp
		}
		portsPicked(attempt, tcp)
	}
	var remote strings.Builder
	fmt.Fprintf(&remote, "    <remote_servers>\n        <%s>\n", o.Name)
	for s := 0; s < o.Shards; s++ {
		remote.WriteString("            <shard><internal_replication>true</internal_replication>")
		for r := 0; r < o.Replicas; r++ {
			fmt.Fprintf(&remote, "<replica><host>127.0.0.1</host><port>%d</port></replica>", ps[s*o.Replicas+r].tcp)
		}
		remote.WriteString("</shard>\n")
	}
	fmt.Fprintf(&remote, "        </%s>\n    </remote_servers>\n", o.Name)

	for s := 0; s < o.Shards; s++ {
		for r := 0; r < o.Replicas; r++ {
			p := ps[s*o.Replicas+r]
			extra := fmt.Sprintf(`    <zookeeper><node><host>127.0.0.1</host><port>%s</port></node><session_timeout_ms>30000</session_timeout_ms></zookeeper>
    <macros><shard>%02d</shard><replica>r%d</replica></macros>
    <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
`, portOf(c.ZooKeeperAddr), s+1, r+1) + remote.String()
			n := &Node{Shard: s + 1, Replica: r + 1, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(p.tcp)),
				opts: chlocal.Options{
					Binary: "clickhouse-server", Dir: filepath.Join(dir, fmt.Sprintf("s%dr%d", s+1, r+1)),
					StartTimeout: 60 * time.Second, TCPPort: p.tcp, HTTPPort: p.http, InterserverPort: p.inter,
					ExtraConfig: extra, ProfileSettings: ProfileSettings,
				}}
			c.Nodes = append(c.Nodes, n)
		}
	}
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.Start(context.Background()) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("start %s: %w", c.Nodes[i], err)
		}
	}
	return nil
}

// stopServers stops every server started (ZooKeeper keeps running).
func (c *Cluster) stopServers() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Stop() }()
	}
	wg.Wait()
}

// ProfileSettings are the user-profile settings cluster mode relies on
// (docs/cluster.md): reads and writes prefer the first live replica so a
// kvtrail process reads what it just wrote, and on 18.16 the DDL worker that
// runs ON CLUSTER statements on the other hosts needs LowCardinality allowed
// in its profile (the initiator's query settings do not travel with it).
const ProfileSettings = `<load_balancing>in_order</load_balancing><allow_experimental_low_cardinality_type>1</allow_experimental_low_cardinality_type>`

func (n *Node) String() string {
	return fmt.Sprintf("shard %d replica %d (%s)", n.Shard, n.Replica, n.Addr)
}

// Start (re)starts the node's server on its ports and data directory.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		return nil
	}
	srv, err := chlocal.Start(ctx, n.opts)
	if err != nil {
		return err
	}
	n.srv = srv
	return nil
}

// Stop stops the node's server (SIGTERM, waits for exit).
func (n *Node) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		n.srv.Stop()
		n.srv = nil
	}
}

// logTails logs the end of each running server's logs.
func (c *Cluster) logTails(t testing.TB) {
	for _, n := range c.Nodes {
		n.mu.Lock()
		if n.srv != nil {
			t.Logf("testcluster: %s logs:\n%s", n, n.srv.LogTail())
		}
		n.mu.Unlock()
	}
}

// Addrs lists every node's native endpoint, shard by shard.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Node returns the node of shard s, replica r (1-based).
func (c *Cluster) Node(s, r int) *Node {
	for _, n := range c.Nodes {
		if n.Shard == s && n.Replica == r {
			return n
		}
	}
	return nil
}

// stopAll stops the servers in parallel (each takes about 2 s), then
// ZooKeeper.
func (c *Cluster) stopAll() {
	c.stopServers()
	if c.zk != nil && c.zk.Process != nil {
		_ = c.zk.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.zkDone:
		case <-time.After(10 * time.Second):
			_ = c.zk.Process.Kill()
			<-c.zkDone
		}
	}
}

func (c *Cluster) startZooKeeper(dir string) error {
	port, err := freeport.Pick()
	if err != nil {
		return err
	}
	for _, d := range []string{"conf", "data", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o750); err != nil {
			return err
		}
	}
	cfg := fmt.Sprintf(`tickTime=2000
initLimit=10
syncLimit=5
dataDir=%s/data
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr
`, dir, port)
	if err := os.WriteFile(filepath.Join(dir, "conf", "zoo.cfg"), []byte(cfg), 0o640); err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(dir, "log", "zookeeper.out"))
	if err != nil {
		return err
	}
	defer out.Close()
	cp := filepath.Join(dir, "conf") + ":" + ZooKeeperJar
	if _, err := os.Stat("/usr/share/java/slf4j-simple.jar"); err == nil {
		cp += ":/usr/share/java/slf4j-simple.jar"
	}
	cmd := exec.Command("java", "-Xmx256m", "-Dzookeeper.log.dir="+filepath.Join(dir, "log"), "-cp", cp,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "conf", "zoo.cfg"))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	done, _, err := chlocal.StartTied(cmd) // dies with the test binary
	if err != nil {
		return err
	}
	c.zk, c.zkDone = cmd, done
	c.ZooKeeperAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		// Not ruok: it answers imok before the server serves sessions, and
		// a ClickHouse 18.16 that connects then gives up on ZooKeeper (its
		// DDL worker even crashes). srvr reports a version only once serving.
		if strings.HasPrefix(fourLetter(c.ZooKeeperAddr, "srvr"), "Zookeeper version") {
			return nil
		}
		select {
		case <-c.zkDone:
			b, _ := os.ReadFile(filepath.Join(dir, "log", "zookeeper.out"))
			return fmt.Errorf("zookeeper exited during startup:\n%s", b)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("zookeeper did not start serving within 30s")
}

func fourLetter(addr, cmd string) string {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return ""
	}
	line, _ := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line)
}

func requireTools(t testing.TB) {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("clickhouse-server"); err != nil {
		missing = append(missing, "clickhouse-server")
	}
	if _, err := exec.LookPath("java"); err != nil {
		missing = append(missing, "java")
	}
	if _, err := os.Stat(ZooKeeperJar); err != nil {
		missing = append(missing, ZooKeeperJar+" (apt-get install zookeeper)")
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv(testdb.EnvRequire) == "1" {
		t.Fatalf("a ClickHouse cluster is required (%s=1) but these are missing: %s", testdb.EnvRequire, strings.Join(missing, ", "))
	}
	t.Skipf("no ClickHouse cluster for this test: missing %s", strings.Join(missing, ", "))
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
