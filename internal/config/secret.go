package config

// Secret is a string that never prints: config print, logs and errors show
// "<secret>" (empty stays empty, so a missing password is visible).
type Secret string

const masked = "<secret>"

// String masks the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return masked
}

// MarshalYAML masks the value in `kvtrail config print`.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalText masks the value in JSON and text encodings.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Reveal returns the real value, for the one place that needs it.
func (s Secret) Reveal() string { return string(s) }
