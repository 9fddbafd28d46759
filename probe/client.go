package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// answer is what one chat completion returned.
type answer struct {
	Status           int
	Text             string
	PromptTokens     uint64
	CompletionTokens uint64
	HasUsage         bool
	FinishReason     string
	Err              string
	Latency          time.Duration
}

type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []chatMessage  `json:"messages"`
	MaxTokens     int            `json:"max_tokens"`
	Temperature   float64        `json:"temperature"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type usage struct {
	PromptTokens     uint64 `json:"prompt_tokens"`
	CompletionTokens uint64 `json:"completion_tokens"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// maxBody bounds what is read of one answer: a canary answer is a few
// tokens, so anything larger is cut (and kept as evidence up to the cut).
const maxBody = 1 << 20

// chat sends one OpenAI-compatible chat completion. Transport failures are
// returned in answer.Err with Status 0: a probe that could not be sent is a
// result too (verdict "error"), never a crash.
func chat(ctx context.Context, hc *http.Client, endpoint, key, model, prompt string, maxTokens int, stream bool) answer {
	req := chatRequest{Model: model, Messages: []chatMessage{{Role: "user", Content: prompt}}, MaxTokens: maxTokens, Stream: stream}
	if stream {
		req.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(endpoint, "/")+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return answer{Err: fmt.Sprintf("build request: %v", err)}
	}
	hr.Header.Set("Content-Type", "application/json")
	if key != "" {
		hr.Header.Set("Authorization", "Bearer "+key)
	}
	t0 := time.Now()
	resp, err := hc.Do(hr)
	if err != nil {
		return answer{Err: fmt.Sprintf("send: %v", err), Latency: time.Since(t0)}
	}
	defer resp.Body.Close()
	a := answer{Status: resp.StatusCode}
	r := io.LimitReader(resp.Body, maxBody)
	switch {
	case resp.StatusCode != http.StatusOK:
		b, _ := io.ReadAll(r)
		a.Err = string(b)
	case stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		readStream(r, &a)
	default:
		b, err := io.ReadAll(r)
		if err != nil {
			a.Err = fmt.Sprintf("read: %v", err)
			break
		}
		var cr chatResponse
		if err := json.Unmarshal(b, &cr); err != nil {
			a.Err = fmt.Sprintf("answer is not a chat completion: %v", err)
			a.Text = string(b)
			break
		}
		if len(cr.Choices) > 0 {
			a.Text = cr.Choices[0].Message.Content
			if fr := cr.Choices[0].FinishReason; fr != nil {
				a.FinishReason = *fr
			}
		}
		if cr.Usage != nil {
			a.PromptTokens, a.CompletionTokens, a.HasUsage = cr.Usage.PromptTokens, cr.Usage.CompletionTokens, true
		}
	}
	a.Latency = time.Since(t0)
	return a
}

// readStream folds server-sent chat.completion.chunk events into a.
func readStream(r io.Reader, a *answer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxBody)
	var text strings.Builder
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			break
		}
		var cr chatResponse
		if err := json.Unmarshal([]byte(data), &cr); err != nil {
			// An error object or junk mid-stream: keep it as the answer's text.
			text.WriteString(data)
			a.Err = "malformed stream event"
			continue
		}
		for _, c := range cr.Choices {
			text.WriteString(c.Delta.Content)
			if c.FinishReason != nil && *c.FinishReason != "" {
				a.FinishReason = *c.FinishReason
			}
		}
		if cr.Usage != nil {
			a.PromptTokens, a.CompletionTokens, a.HasUsage = cr.Usage.PromptTokens, cr.Usage.CompletionTokens, true
		}
	}
	if err := sc.Err(); err != nil && a.Err == "" {
		a.Err = fmt.Sprintf("read stream: %v", err)
	}
	a.Text = text.String()
}
