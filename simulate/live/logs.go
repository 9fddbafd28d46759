package live

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"
)

// stream names one log: the labels kvtrail's push endpoint reads.
type stream struct {
	node, role, format string
}

func (s stream) labels() string {
	return fmt.Sprintf(`{format=%q, node=%q, role=%q}`, s.format, s.node, s.role)
}

// sink receives every log line the live cluster writes.
type sink interface {
	write(s stream, ts time.Time, line string)
	close()
}

// fileSink appends each stream to DIR/<node>.log (gateway: .jsonl).
type fileSink struct {
	dir   string
	mu    sync.Mutex
	files map[string]*bufio.Writer
	raw   []*os.File
	err   error
}

func newFileSink(dir string) (*fileSink, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("live logs: %w", err)
	}
	return &fileSink{dir: dir, files: map[string]*bufio.Writer{}}, nil
}

func (f *fileSink) write(s stream, _ time.Time, line string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.files[s.node]
	if !ok {
		ext := ".log"
		if s.format == "gateway-json" {
			ext = ".jsonl"
		}
		fh, err := os.OpenFile(filepath.Join(f.dir, s.node+ext), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			f.err = err
			return
		}
		f.raw = append(f.raw, fh)
		w = bufio.NewWriter(fh)
		f.files[s.node] = w
	}
	w.WriteString(line)
	w.WriteByte('\n')
	// Flushed per line: the files are read live (tail, promtail).
	w.Flush()
}

func (f *fileSink) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.files {
		w.Flush()
	}
	for _, fh := range f.raw {
		fh.Close()
	}
}

// lokiSink batches lines and pushes them to a Loki push endpoint (kvtrail
// serve's /loki/api/v1/push) as a snappy-compressed logproto.PushRequest.
type lokiSink struct {
	url, token string
	hc         *http.Client
	log        *slog.Logger
	every      time.Duration

	mu      sync.Mutex
	pending map[stream][]push.Entry
	n       int
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	failed  int
}

// maxPending bounds what is kept while the endpoint is down.
const maxPending = 200000

func newLokiSink(url, token string, every time.Duration, log *slog.Logger) *lokiSink {
	s := &lokiSink{url: url, token: token, hc: &http.Client{Timeout: 10 * time.Second}, log: log, every: every,
		pending: map[stream][]push.Entry{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *lokiSink) write(st stream, ts time.Time, line string) {
	s.mu.Lock()
	if s.n < maxPending {
		s.pending[st] = append(s.pending[st], push.Entry{Timestamp: ts, Line: line})
		s.n++
	}
	big := s.n >= 1000
	s.mu.Unlock()
	if big {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func (s *lokiSink) loop() {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.flush()
			return
		case <-t.C:
		case <-s.kick:
		}
		s.flush()
	}
}

func (s *lokiSink) flush() {
	s.mu.Lock()
	if s.n == 0 {
		s.mu.Unlock()
		return
	}
	batch := s.pending
	s.pending, s.n = map[stream][]push.Entry{}, 0
	s.mu.Unlock()
	keys := make([]stream, 0, len(batch))
	for k := range batch {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].node < keys[j].node })
	req := push.PushRequest{}
	for _, k := range keys {
		req.Streams = append(req.Streams, push.Stream{Labels: k.labels(), Entries: batch[k]})
	}
	if err := s.send(&req); err != nil {
		s.failed++
		s.log.Warn("live logs: push failed; retrying with the next batch", slog.String("error", err.Error()))
		s.mu.Lock()
		for k, es := range batch {
			if s.n+len(es) <= maxPending {
				s.pending[k] = append(es, s.pending[k]...)
				s.n += len(es)
			}
		}
		s.mu.Unlock()
	}
}

func (s *lokiSink) send(req *push.PushRequest) error {
	raw, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.url, bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/x-protobuf")
	if s.token != "" {
		hr.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.hc.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return fmt.Errorf("push: %s: %.200s", resp.Status, b.String())
	}
	return nil
}

func (s *lokiSink) close() {
	close(s.stop)
	<-s.done
}

type multiSink []sink

func (m multiSink) write(s stream, ts time.Time, line string) {
	for _, x := range m {
		x.write(s, ts, line)
	}
}

func (m multiSink) close() {
	for _, x := range m {
		x.close()
	}
}
