// Package freeport picks loopback TCP ports for the servers kvtrail starts
// itself: a managed ClickHouse, the test clusters, bench's servers.
//
// The usual trick, listening on port 0 and closing, returns a port from the
// kernel's ephemeral range, the range every outgoing connection on the
// machine draws its local port from. Between the pick and the server's own
// bind, any client connection (a test suite opens thousands) can take that
// port, and the server fails with "Address already in use": CI saw it.
// Ports below the ephemeral range are never handed to outgoing
// connections, so only another listener can take one in that window.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// rangeFile holds the kernel's ephemeral range as "low high" (Linux).
var rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// minLow is the lowest ephemeral-range start for which a range below it is
// used: with a lower start there is too little room under it (and it would
// reach well-known ports).
const minLow = 8192

// given holds the ports Pick returned in this process. A picked port is
// not bound until its server starts, so callers that pick several before
// starting any (a cluster's servers, a server's TCP and HTTP ports) would
// otherwise be handed the same port twice by the random pick.
var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Pick returns a loopback TCP port that nothing listened on when asked and
// that Pick has not returned before in this process. It prefers ports
// below the ephemeral range; where that range is unknown or starts too
// low, it falls back to ones the kernel assigns.
func Pick() (int, error) {
	given.Lock()
	defer given.Unlock()
	if lo, hi, ok := below(); ok {
		if p, ok := pickIn(lo, hi, 64, given.ports); ok {
			given.ports[p] = true
			return p, nil
		}
	}
	for i := 0; i < 64; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free loopback port: %w", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !given.ports[p] {
			given.ports[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("find a free loopback port: the kernel assigned only ports already handed out")
}

// below returns [lo, hi): the upper half of the ports under the ephemeral
// range, far from the well-known ones.
func below() (lo, hi int, ok bool) {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < minLow || low > 65535 {
		return 0, 0, false
	}
	return low / 2, low, true
}

// pickIn tries up to tries random ports of [lo, hi) and returns the first
// that is not in taken and that nothing listens on.
func pickIn(lo, hi, tries int, taken map[int]bool) (int, bool) {
	for i := 0; i < tries; i++ {
		p := lo + rand.IntN(hi-lo)
		if !taken[p] && free(p) {
			return p, true
		}
	}
	return 0, false
}

func free(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
