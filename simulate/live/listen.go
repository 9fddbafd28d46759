package live

import (
	"fmt"
	"net"
)

func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("live: listen on %s: %w", addr, err)
	}
	return ln, nil
}
