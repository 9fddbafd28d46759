package chstore

import (
	"context"
	"fmt"
	"time"
)

// Revocations are only inserted; a row written twice (a retried logout)
// folds into one in the Replacing engine and counts the same.
const uiInsertRevocation = `INSERT INTO session_revocations (session_id, user, revoked_at, expires)
SELECT ?, ?, ?, ?`

// RevokeSession records that session id (of user, valid until expires)
// was logged out.
func (s UIStore) RevokeSession(ctx context.Context, id, user string, expires time.Time) error {
	if err := s.Store.Exec(ctx, uiInsertRevocation, id, user, uiUTC(time.Now()), uiUTC(expires)); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// SessionRevoked reports whether session id was logged out (a primary-key
// read: the table is ordered by session_id).
func (s UIStore) SessionRevoked(ctx context.Context, id string) (bool, error) {
	var n uint64
	if err := s.Store.QueryRow(ctx, "SELECT count() FROM session_revocations WHERE session_id = ?", id).Scan(&n); err != nil {
		return false, fmt.Errorf("look up session revocation: %w", err)
	}
	return n > 0, nil
}
