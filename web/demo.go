package web

import (
	"context"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kvtrail/kvtrail/internal/config"
)

// DemoPassword is the password of the demo user `kvtrail demo` adds when
// the config has no users. The demo listens on loopback only.
const DemoPassword = "kvtrail-demo"

// DemoUser is an admin user "demo" with DemoPassword, for `kvtrail demo`
// only: never add it to a served configuration.
func DemoUser() (config.User, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(DemoPassword), bcrypt.DefaultCost)
	if err != nil {
		return config.User{}, err
	}
	return config.User{Name: "demo", Role: "admin", PasswordHash: config.Secret(h)}, nil
}

// SeedCase opens a case for the demo unless one with the same name exists,
// and returns it. The demo's first page is this case, on the simulated
// incident.
func SeedCase(ctx context.Context, st caseStore, name string, from, to time.Time, notes, by string) (Case, error) {
	cases, err := st.ListCases(ctx)
	if err != nil {
		return Case{}, err
	}
	for _, c := range cases {
		if c.Name == name {
			return c, nil
		}
	}
	now := time.Now().UTC()
	c := Case{ID: newID("case-"), Name: name, From: from.UTC(), To: to.UTC(), Notes: notes, Status: "open",
		CreatedBy: by, CreatedAt: now, UpdatedAt: now, Version: uint64(now.UnixNano())}
	if err := st.SaveCase(ctx, c); err != nil {
		return Case{}, err
	}
	return c, nil
}
