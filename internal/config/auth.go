package config

// Auth configures the auth section (see kvtrail.example.yaml).
type Auth struct{}

func defaultAuth() Auth { return Auth{} }

// validate returns one error per bad value, each naming its key.
func (c Auth) validate() []error { return nil }
