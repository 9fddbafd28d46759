package chdbstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// LockFile is the file in an embedded store's directory that its one
// process holds locked.
const LockFile = "kvtrail.lock"

// Holder describes the process holding an embedded store, as written in
// its lock file for whoever finds the store busy.
type Holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"` // the kvtrail subcommand, e.g. "serve"
	Started time.Time `json:"started"`
	// URL is where a serving holder answers (its UI and API), once it
	// listens.
	URL string `json:"url,omitempty"`
}

// Lock is a held embedded store directory. The engine keeps its data and
// its parts' state in the process (one chdb session per process, no
// server in between), so two processes on one directory would each
// believe they own it: the lock makes the second one stop before it opens
// anything. It is an flock(2) lock, so the kernel releases it when the
// holder dies, even by SIGKILL: a crash never leaves a stale lock.
type Lock struct {
	f *os.File
	h Holder
}

// Acquire locks dir (created if needed) for h. When another process holds
// it, the error is of kind Conflict (exit code 5, HTTP 409) and names the
// holder and, when it serves, its URL.
func Acquire(dir string, h Holder) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded store: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("embedded store: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, domain.E(domain.Conflict, busy(dir, path))
		}
		return nil, fmt.Errorf("embedded store: lock %s: %w", path, err)
	}
	l := &Lock{f: f, h: h}
	if err := l.write(); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// busy explains who holds dir. The holder writes its record right after
// locking; a reader that comes in between sees an empty file, so it looks
// a few times before settling for "another process".
func busy(dir, path string) error {
	var h Holder
	for range 20 {
		b, err := os.ReadFile(path)
		if err == nil && json.Unmarshal(b, &h) == nil && h.PID > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h.PID == 0 {
		return fmt.Errorf("the embedded store in %s is in use by another kvtrail process; it serves one process at a time", dir)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the embedded store in %s is in use by `kvtrail %s` (pid %d, since %s); it serves one process at a time",
		dir, h.Command, h.PID, h.Started.UTC().Format(time.RFC3339))
	if h.URL != "" {
		fmt.Fprintf(&b, ": use that server's UI and API at %s, or stop it first", h.URL)
	} else {
		b.WriteString(": wait for it to finish or stop it first")
	}
	return errors.New(b.String())
}

func (l *Lock) write() error {
	b, err := json.Marshal(l.h)
	if err != nil {
		return err
	}
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("embedded store: %w", err)
	}
	if _, err := l.f.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("embedded store: %w", err)
	}
	return nil
}

// SetURL records where the holder serves, for the next process that finds
// the store busy.
func (l *Lock) SetURL(url string) error {
	l.h.URL = url
	return l.write()
}

// Holder is the record this lock wrote.
func (l *Lock) Holder() Holder { return l.h }

// Release unlocks the directory. The record is left in the file, which is
// harmless: only the flock says the store is held.
func (l *Lock) Release() {
	if l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
		l.f = nil
	}
}
