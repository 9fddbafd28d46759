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
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(os.Stderr, "kvtrail:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "kvtrail:", err)
		os.Exit(1)
	}
}

// usageError marks errors in how kvtrail was invoked (exit status 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }
