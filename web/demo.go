package web

import (
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
