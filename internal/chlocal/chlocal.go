// Package chlocal runs a private clickhouse-server for kvtrail: the embedded
// default when no ClickHouse address is configured, and the throwaway server
// of the test harness. It listens on loopback only, on free ports, keeps its
// data in one directory (reused across runs) and dies with its parent.
package chlocal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/kvtrail/kvtrail/internal/freeport"
)

// Options configures a managed server.
type Options struct {
	// Binary is the clickhouse-server executable (looked up in PATH).
	Binary string
	// Dir holds config, data and logs. Created if missing; reused if present.
	Dir string
	// StartTimeout bounds the wait for the server to answer a ping.
	StartTimeout time.Duration
	// TCPPort fixes the native port (0: a free one). Tests that restart a
	// server and expect clients to reconnect use it.
	TCPPort int
	// HTTPPort fixes the HTTP port (0: a free one).
	HTTPPort int
	// InterserverPort, when set, is the replication (interserver HTTP)
	// port; replicas fetch parts from each other through it, on 127.0.0.1.
	// Zero leaves replication off, as for a single server.
	InterserverPort int
	// ExtraConfig is XML inserted into the server config (zookeeper,
	// macros, remote_servers, distributed_ddl for a cluster member).
	ExtraConfig string
	// ProfileSettings is XML inserted into the default user profile, e.g.
	// <load_balancing>in_order</load_balancing>.
	ProfileSettings string
}

// Server is a running managed clickhouse-server.
type Server struct {
	// Addr is the native-protocol endpoint (127.0.0.1:port).
	Addr string
	// HTTPAddr is the HTTP endpoint, for clickhouse-client-free tooling.
	HTTPAddr string
	dir      string
	cmd      *exec.Cmd
	exited   <-chan struct{}
	waitErr  func() error
}

// Start launches the server and waits until it answers.
func Start(ctx context.Context, o Options) (*Server, error) {
	bin, err := exec.LookPath(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("managed ClickHouse: %w: %q not found in PATH (install Debian's clickhouse-server, or set clickhouse.addr to an existing server): %v", ErrNotInstalled, o.Binary, err)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("managed ClickHouse: data dir %q: %w", o.Dir, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "log"), 0o750); err != nil {
		return nil, fmt.Errorf("managed ClickHouse: create %s: %w", dir, err)
	}
	if pid, alive := runningPID(dir); alive {
		return nil, fmt.Errorf("managed ClickHouse: %s is in use by clickhouse-server pid %d (another kvtrail?); stop it or use another local.data_dir", dir, pid)
	}
	tcp := o.TCPPort
	if tcp == 0 {
		if tcp, err = freeport.Pick(); err != nil {
			return nil, fmt.Errorf("managed ClickHouse: %w", err)
		}
	}
	httpPort := o.HTTPPort
	if httpPort == 0 {
		if httpPort, err = freeport.Pick(); err != nil {
			return nil, fmt.Errorf("managed ClickHouse: %w", err)
		}
	}
	if err := writeConfig(dir, tcp, httpPort, o); err != nil {
		return nil, err
	}
	stdout, err := os.OpenFile(filepath.Join(dir, "log", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, fmt.Errorf("managed ClickHouse: %w", err)
	}
	defer stdout.Close()
	cmd := exec.Command(bin, "--config-file="+filepath.Join(dir, "config.xml"))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stdout, stdout
	// Pdeathsig: if kvtrail dies (even by SIGKILL) the kernel stops the
	// server, so no orphan keeps the data directory locked. Setpgid keeps
	// a terminal's Ctrl-C from reaching the server before kvtrail has
	// finished with it; kvtrail stops it itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	exited, waitErr, err := StartTied(cmd)
	if err != nil {
		return nil, fmt.Errorf("managed ClickHouse: start %s: %w", bin, err)
	}
	s := &Server{
		Addr:     net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp)),
		HTTPAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort)),
		dir:      dir,
		cmd:      cmd,
		exited:   exited,
		waitErr:  waitErr,
	}
	_ = os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o640)

	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if err := s.waitReady(ctx, timeout); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr}, DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("managed ClickHouse: %w", err)
	}
	defer conn.Close()
	deadline := time.Now().Add(timeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := conn.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("managed ClickHouse exited during startup (%v):\n%s", s.waitErr(), s.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("managed ClickHouse did not answer within %s: %v\n%s", timeout, err, s.logTail())
		}
	}
}

// Stop terminates the server gracefully (SIGTERM, then SIGKILL after 15 s)
// and waits for it to exit. Safe to call more than once.
func (s *Server) Stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	_ = os.Remove(filepath.Join(s.dir, "pid"))
}

// Dir is the server's directory.
func (s *Server) Dir() string { return s.dir }

// PID is the server's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// LogTail is the end of the server's stdout and error logs (4,000 bytes
// of each at most): what a failed test prints to say why a server
// stopped answering.
func (s *Server) LogTail() string { return s.logTail() }

func (s *Server) logTail() string {
	var parts []string
	for _, name := range []string{"stdout.log", "server.err.log"} {
		b, err := os.ReadFile(filepath.Join(s.dir, "log", name))
		if err != nil || len(b) == 0 {
			continue
		}
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		parts = append(parts, name+":\n"+string(b))
	}
	return strings.Join(parts, "\n")
}

// runningPID reports a live clickhouse-server recorded in dir's pid file.
func runningPID(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || !strings.HasPrefix(strings.TrimSpace(string(comm)), "clickhouse") {
		return 0, false // stale pid file: the process is gone or is something else
	}
	return pid, true
}

// writeConfig writes a minimal config: loopback only, no includes (the
// Debian config's incl= entries warn and widen listen_host), UTC, small
// caches. It is rewritten on every start because the ports change.
func writeConfig(dir string, tcp, httpPort int, o Options) error {
	extra := o.ExtraConfig
	if o.InterserverPort != 0 {
		extra = fmt.Sprintf("    <interserver_http_port>%d</interserver_http_port>\n    <interserver_http_host>127.0.0.1</interserver_http_host>\n", o.InterserverPort) + extra
	}
	cfg := fmt.Sprintf(`<?xml version="1.0"?>
<!-- Generated by kvtrail on every start; edits are overwritten. -->
<yandex>
    <logger><level>warning</level><log>%[1]s/log/server.log</log><errorlog>%[1]s/log/server.err.log</errorlog><size>10M</size><count>2</count></logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>%[2]d</tcp_port>
    <http_port>%[3]d</http_port>
    <path>%[1]s/data/</path>
    <tmp_path>%[1]s/tmp/</tmp_path>
    <user_files_path>%[1]s/user_files/</user_files_path>
    <format_schema_path>%[1]s/format_schemas/</format_schema_path>
    <users_config>users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <timezone>UTC</timezone>
%[4]s</yandex>
`, dir, tcp, httpPort, extra)
	users := `<?xml version="1.0"?>
<!-- Generated by kvtrail. Loopback-only user without a password: the server
     listens on 127.0.0.1 only and serves this one kvtrail process. -->
<yandex>
    <profiles><default>` + o.ProfileSettings + `</default></profiles>
    <users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
    <quotas><default></default></quotas>
</yandex>
`
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), []byte(cfg), 0o640); err != nil {
		return fmt.Errorf("managed ClickHouse: write config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.xml"), []byte(users), 0o640); err != nil {
		return fmt.Errorf("managed ClickHouse: write users: %w", err)
	}
	return nil
}

// ErrNotInstalled is wrapped when the server binary is missing.
var ErrNotInstalled = errors.New("clickhouse-server not installed")

// StartTied starts cmd so that it dies with this process: it gets SIGTERM
// through Pdeathsig when kvtrail exits, however it exits. The kernel sends
// that signal when the *thread* that started the child exits, not the
// process (golang/go#27505), and a Go thread exits when a goroutine locked
// to it returns. So the child is started from a goroutine locked to its own
// thread that stays blocked in Wait, keeping the thread alive and unused by
// anything else, for the child's whole life. The channel is closed when
// the child has exited; the func then returns Wait's error.
func StartTied(cmd *exec.Cmd) (<-chan struct{}, func() error, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	started := make(chan error, 1)
	exited := make(chan struct{})
	var werr error
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		werr = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return nil, nil, err
	}
	return exited, func() error { <-exited; return werr }, nil
}
