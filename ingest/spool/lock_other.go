//go:build !unix

package spool

import (
	"os"
	"path/filepath"
)

// lockDir only creates the LOCK file: kvtrail runs on Linux, and this
// build exists so the package compiles elsewhere.
func lockDir(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
}
