package config

import (
	"fmt"
	"net/url"
	"time"
)

// Probes configures the canary marker prober (`kvtrail probe`, and serve
// when Enabled). See docs/prevention.md for what it sends and costs.
type Probes struct {
	// Enabled makes serve send probe rounds on the budget below.
	Enabled bool `mapstructure:"enabled" yaml:"enabled"`
	// Endpoint is the OpenAI-compatible base URL (…/v1/chat/completions
	// is appended), e.g. the gateway customers use.
	Endpoint string `mapstructure:"endpoint" yaml:"endpoint"`
	// Model is sent as the request's model.
	Model string `mapstructure:"model" yaml:"model"`
	// Identities are the API keys probes are sent with; at least two, so
	// the provider sees two tenants. Keys are masked in config print.
	Identities []ProbeIdentity `mapstructure:"identities" yaml:"identities"`
	// PerHour is the request budget of serve's rounds (all identities and
	// kinds): rounds are spaced to stay within it.
	PerHour int `mapstructure:"per_hour" yaml:"per_hour"`
	// MinInterval keeps rounds at least this far apart.
	MinInterval time.Duration `mapstructure:"min_interval" yaml:"min_interval"`
	// MaxTokens bounds each answer (max_tokens of the request).
	MaxTokens int `mapstructure:"max_tokens" yaml:"max_tokens"`
	// MaxPromptTokens bounds the long threshold probes; 0 sends no long
	// probe at all. A threshold probe over it is skipped and reported.
	MaxPromptTokens uint64 `mapstructure:"max_prompt_tokens" yaml:"max_prompt_tokens"`
	// Margin places long probes this many tokens below and above each
	// node's rejection threshold.
	Margin uint64 `mapstructure:"margin" yaml:"margin"`
	// Timeout per request.
	Timeout time.Duration `mapstructure:"timeout" yaml:"timeout"`
}

// ProbeIdentity is one probe API key.
type ProbeIdentity struct {
	Name   string `mapstructure:"name" yaml:"name"`
	APIKey Secret `mapstructure:"api_key" yaml:"api_key"`
}

func defaultProbes() Probes {
	return Probes{PerHour: 60, MinInterval: 10 * time.Second, MaxTokens: 32, MaxPromptTokens: 0, Margin: 64, Timeout: 2 * time.Minute}
}

func (c Probes) validate() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("probes.%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("endpoint", "%q is not an http(s) URL", c.Endpoint)
		}
	}
	if c.Enabled {
		if c.Endpoint == "" {
			bad("endpoint", "is required when probes.enabled is true")
		}
		if len(c.Identities) < 2 {
			bad("identities", "at least two are needed (got %d) so a cross-tenant answer can be told apart", len(c.Identities))
		}
	}
	names := map[string]bool{}
	for i, id := range c.Identities {
		if id.Name == "" || names[id.Name] {
			bad(fmt.Sprintf("identities[%d].name", i), "%q is empty or repeated", id.Name)
		}
		names[id.Name] = true
	}
	if c.PerHour < 1 {
		bad("per_hour", "must be at least 1, got %d", c.PerHour)
	}
	if c.MaxTokens < 1 {
		bad("max_tokens", "must be at least 1, got %d", c.MaxTokens)
	}
	if c.Margin < 1 {
		bad("margin", "must be at least 1, got %d", c.Margin)
	}
	if c.Timeout < time.Second {
		bad("timeout", "must be at least 1s, got %s", c.Timeout)
	}
	if c.MinInterval < 0 {
		bad("min_interval", "must not be negative")
	}
	return errs
}
