// Command kvtrail finds, from logs and metrics alone, which responses of a
// disaggregated (prefill/decode) LLM cluster were built from another
// customer's KV cache, and who must be told. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kvtrail/kvtrail/domain"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kvtrail:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode maps an error to the exit status: 2 for a usage error, else the
// domain kind's code (the same kinds the API maps to HTTP statuses), 1 for
// anything unclassified.
func exitCode(err error) int {
	var ue usageError
	if errors.As(err, &ue) {
		return domain.ExitInvalid
	}
	return domain.ExitCode(domain.KindOf(err))
}

// usageError marks errors in how kvtrail was invoked (exit status 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }
