package live

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// Handler serves the OpenAI-compatible API and the admin switches:
//
//	POST /v1/chat/completions   chat completion, streaming or not
//	GET  /admin/state           engine and counters (first leaked response)
//	POST /admin/reboot          reboot with an Engine JSON (switch the bug on or off)
func (c *Cluster) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", c.chat)
	mux.HandleFunc("GET /admin/state", func(w http.ResponseWriter, _ *http.Request) {
		e, st := c.State()
		writeJSON(w, http.StatusOK, map[string]any{"engine": e, "stats": st,
			"max_req_input_len": e.maxReqInputLen(), "bug_open": e.buggy() && e.maxReqInputLen()+6 < e.ContextLen})
	})
	mux.HandleFunc("POST /admin/reboot", func(w http.ResponseWriter, r *http.Request) {
		e, _ := c.State()
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&e); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body is not an engine JSON: " + err.Error()})
			return
		}
		if err := c.Reboot(e); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, e)
	})
	return mux
}

type chatReq struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	MaxTokens int  `json:"max_tokens"`
	Stream    bool `json:"stream"`
}

// maxRequest bounds a request body (a context of words fits easily).
const maxRequest = 64 << 20

func (c *Cluster) chat(w http.ResponseWriter, r *http.Request) {
	var req chatReq
	if err := json.NewDecoder(io.LimitReader(r.Body, maxRequest)).Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, "request body is not a chat completion request: "+err.Error())
		return
	}
	var prompt strings.Builder
	for _, m := range req.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			// Content parts: take the text of each part.
			var parts []struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(m.Content, &parts)
			for _, p := range parts {
				s += p.Text + " "
			}
		}
		prompt.WriteString(s)
		prompt.WriteByte('\n')
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 || maxTokens > 256 {
		maxTokens = 16
	}
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	res := c.serve(tenantOf(key), prompt.String(), maxTokens, req.Stream)
	if res.status != http.StatusOK {
		writeErr(w, res.status, res.errMsg)
		return
	}
	id := "chatcmpl-" + alnum(24)
	usage := map[string]int{"prompt_tokens": res.prompt, "completion_tokens": res.complete, "total_tokens": res.prompt + res.complete}
	if !req.Stream {
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]string{"role": "assistant", "content": res.text}, "finish_reason": "stop"}},
			"usage":   usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	for i, word := range strings.Fields(res.text) {
		if i > 0 {
			word = " " + word
		}
		send(map[string]any{"id": id, "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]string{"content": word}, "finish_reason": nil}}})
	}
	send(map[string]any{"id": id, "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]string{}, "finish_reason": "stop"}}})
	send(map[string]any{"id": id, "object": "chat.completion.chunk", "choices": []any{}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"object": "error", "message": msg, "type": http.StatusText(status), "code": status})
}

// Background sends tenant traffic until ctx ends: short prompts carrying
// each tenant's own confidential-looking text, and (LongShare of them)
// long prompts in the upper part of the context, which the bug serves from
// stale pages.
func (c *Cluster) Background(ctx context.Context) {
	if c.cfg.Rate <= 0 || c.cfg.Tenants <= 0 {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for {
		wait := time.Duration(rng.ExpFloat64() / c.cfg.Rate * float64(time.Second))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		t := rng.IntN(c.cfg.Tenants)
		tenant := fmt.Sprintf("tenant-%02d", t)
		e, _ := c.State()
		n := 20 + rng.IntN(200)
		if rng.Float64() < c.cfg.LongShare {
			lo := e.ContextLen * 3 / 4
			n = lo + rng.IntN(max(1, e.ContextLen-lo-1))
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s confidential ledger entry %d:", tenant, rng.IntN(1_000_000))
		for i := range n {
			b.WriteString(" ")
			b.WriteString(backgroundWords[(i+t)%len(backgroundWords)])
		}
		c.serve(tenant, b.String(), 16, rng.IntN(2) == 0)
		c.mu.Lock()
		c.stats.Background++
		c.mu.Unlock()
	}
}

var backgroundWords = strings.Fields("invoice account balance transfer customer contract quarterly revenue forecast " +
	"patient record diagnosis salary payroll merger draft password reset order shipment address")

// ListenAndServe serves h on addr until ctx ends.
func ListenAndServe(ctx context.Context, addr string, h http.Handler, log *slog.Logger, ready func(url string)) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ln, err := listen(addr)
	if err != nil {
		return err
	}
	if ready != nil {
		ready("http://" + ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	log.Info("live cluster stopping")
	return srv.Shutdown(sctx)
}
