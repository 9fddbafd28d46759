package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/kvtrail/kvtrail/domain"
)

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"usage", usageError{errors.New("--role: bad")}, 2},
		{"invalid", fmt.Errorf("load: %w", domain.Errorf(domain.Invalid, "bad window")), domain.ExitInvalid},
		{"not found", domain.Errorf(domain.NotFound, "no case"), domain.ExitNotFound},
		{"unavailable", domain.E(domain.Unavailable, errors.New("refused")), domain.ExitUnavailable},
		{"plain", errors.New("boom"), 1},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
	}
}

// An unreachable ClickHouse is "unavailable" (exit 4) through the real
// command path, not a generic failure.
func TestUnreachableClickHouseExitsUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"findings", "--clickhouse-addr", addr})
	err = cmd.Execute()
	if err == nil {
		t.Fatal("findings against a closed port succeeded")
	}
	if got := exitCode(err); got != domain.ExitUnavailable {
		t.Fatalf("exit %d for %v, want %d", got, err, domain.ExitUnavailable)
	}
}
