package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Webhook POSTs {"alerts": [...]} as JSON to a URL, retrying 5xx and
// network errors. The URL may hold a token: it never appears in errors.
type Webhook struct {
	URL     string
	Client  *http.Client
	Retries int
}

// Name implements Notifier.
func (w *Webhook) Name() string { return "webhook" }

// Notify delivers the alerts or returns the last error.
func (w *Webhook) Notify(ctx context.Context, alerts []Alert) error {
	body, err := json.Marshal(map[string]any{"source": "kvtrail", "alerts": alerts})
	if err != nil {
		return fmt.Errorf("encode alerts: %w", err)
	}
	client := w.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	retries := w.Retries
	if retries <= 0 {
		retries = 3
	}
	var last error
	for attempt := 0; attempt < retries; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("webhook request: invalid URL")
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			last = fmt.Errorf("webhook: request failed") // the URL may carry a secret: do not echo it
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		switch {
		case resp.StatusCode/100 == 2:
			return nil
		case resp.StatusCode >= 500:
			last = fmt.Errorf("webhook: status %d", resp.StatusCode)
		default:
			return fmt.Errorf("webhook: status %d (not retried)", resp.StatusCode)
		}
	}
	return last
}
