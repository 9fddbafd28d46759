package config

import (
	"fmt"
	"net/url"
	"time"
)

// Alerts configures live analysis in `kvtrail serve`: the analyzers run
// every Interval over the last Lookback, and new findings become alerts.
type Alerts struct {
	// Enabled turns live analysis on.
	Enabled bool `mapstructure:"enabled" yaml:"enabled"`
	// Interval between analysis rounds.
	Interval time.Duration `mapstructure:"interval" yaml:"interval"`
	// Lookback is the window each round analyzes, ending now. It should
	// cover the longest request plus log shipping delay.
	Lookback time.Duration `mapstructure:"lookback" yaml:"lookback"`
	// RepeatInterval is how long one ongoing condition stays quiet after
	// an alert unless its severity rises.
	RepeatInterval time.Duration `mapstructure:"repeat_interval" yaml:"repeat_interval"`
	// LokiURL is a Loki push endpoint (…/loki/api/v1/push); empty: none.
	LokiURL string `mapstructure:"loki_url" yaml:"loki_url"`
	// LokiTenant is sent as X-Scope-OrgID.
	LokiTenant string `mapstructure:"loki_tenant" yaml:"loki_tenant"`
	// WebhookURL receives a JSON POST per round with alerts; empty: none.
	// It may carry a token, so it is masked like a password.
	WebhookURL Secret `mapstructure:"webhook_url" yaml:"webhook_url"`
}

func defaultAlerts() Alerts {
	return Alerts{Enabled: true, Interval: time.Minute, Lookback: 15 * time.Minute, RepeatInterval: time.Hour}
}

func (c Alerts) validate() []error {
	var errs []error
	if c.Interval < time.Second {
		errs = append(errs, fmt.Errorf("alerts.interval: must be at least 1s, got %s", c.Interval))
	}
	if c.Lookback < c.Interval {
		errs = append(errs, fmt.Errorf("alerts.lookback: must be at least alerts.interval (%s), got %s", c.Interval, c.Lookback))
	}
	if c.RepeatInterval <= 0 {
		errs = append(errs, fmt.Errorf("alerts.repeat_interval: must be positive, got %s", c.RepeatInterval))
	}
	for key, v := range map[string]string{"alerts.loki_url": c.LokiURL, "alerts.webhook_url": c.WebhookURL.Reveal()} {
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s: must be an http(s) URL", key))
		}
	}
	return errs
}
