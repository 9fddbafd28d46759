package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/term"

	"github.com/kvtrail/kvtrail/internal/apitoken"
)

func init() { extraCommands = append(extraCommands, newUserCmd) }

// bcryptCost is the work factor of hashes made here: about 0.25 s per check
// on a laptop, which login rate limiting makes cheap to afford.
const bcryptCost = 12

// minPasswordLen is the shortest password hash-password accepts.
const minPasswordLen = 12

func newUserCmd(_ *app) *cobra.Command {
	c := &cobra.Command{Use: "user", Short: "Make password hashes and API tokens for the auth section"}
	c.AddCommand(&cobra.Command{
		Use:   "hash-password",
		Short: "Read a password (prompt, or one line of stdin) and print its bcrypt hash for auth.users[].password_hash",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pw, err := readPassword(cmd.InOrStdin(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if len(pw) < minPasswordLen {
				return usageError{fmt.Errorf("password must be at least %d characters", minPasswordLen)}
			}
			h, err := bcrypt.GenerateFromPassword([]byte(pw), bcryptCost)
			if err != nil {
				return fmt.Errorf("hash password: %w", err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(h))
			return err
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "new-token",
		Short: "Print a new random API token (kvt_<id>_<secret>) and the line for auth.tokens[].token_hash",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, hash, err := apitoken.New()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "token:      %s\ntoken_hash: %q\n(the token is shown once; store only the hash in kvtrail.yaml)\n", tok, hash)
			return err
		},
	})
	return c
}

// readPassword prompts without echo on a terminal, and otherwise reads one
// line of stdin (for scripts: echo "$PW" | kvtrail user hash-password).
func readPassword(in io.Reader, prompt io.Writer) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(prompt, "Password: ")
		a, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
		if err != nil {
			return "", err
		}
		fmt.Fprint(prompt, "Again: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
		if err != nil {
			return "", err
		}
		if string(a) != string(b) {
			return "", usageError{errors.New("passwords differ")}
		}
		return string(a), nil
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}
