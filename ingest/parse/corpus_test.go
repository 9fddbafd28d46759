package parse

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The real-line corpus (testdata/corpus): excerpts of logs people pasted
// into public SGLang, Mooncake, Dynamo and router threads, each file named
// after its thread and listed with its URL and SGLang version in
// SOURCES.tsv. corpus_golden.jsonl pins every record's classification and
// extracted fields; regenerate it with
//
//	go test ./ingest/parse -run TestCorpusGolden -update
//
// and review the diff: a changed line is a changed reading of real evidence.

var update = flag.Bool("update", false, "rewrite testdata/corpus/golden.jsonl")

const corpusDir = "testdata/corpus"

// corpusRecord is one golden entry: where the record is and what kvtrail
// made of it.
type corpusRecord struct {
	File   string            `json:"file"`
	Line   int64             `json:"line"`
	Lines  int               `json:"lines,omitempty"`
	Family string            `json:"family"`
	Format Format            `json:"format"`
	Status Status            `json:"status"`
	Kind   Kind              `json:"kind,omitempty"`
	Event  string            `json:"event,omitempty"`
	TS     string            `json:"ts,omitempty"`
	RID    string            `json:"rid,omitempty"`
	Room   uint64            `json:"room,omitempty"`
	Fields map[string]string `json:"fields,omitempty"`
	Reason string            `json:"reason,omitempty"`
	raw    string
}

type corpusFile struct {
	name, url, version string
	detected           Format
	physical           int
	records            []corpusRecord
}

// readCorpus classifies every corpus file the way ingest does: detect a
// hint, then read each record by its own shape.
func readCorpus(t *testing.T) []corpusFile {
	t.Helper()
	sources := map[string][2]string{}
	for _, l := range fixtureLines(t, "corpus/SOURCES.tsv") {
		if strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "" {
			continue
		}
		f := strings.Split(l, "\t")
		if len(f) < 3 {
			t.Fatalf("SOURCES.tsv: bad row %q", l)
		}
		sources[f[0]] = [2]string{f[1], f[2]}
	}
	names, err := filepath.Glob(filepath.Join(corpusDir, "*.log"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	sort.Strings(names)
	var out []corpusFile
	for _, path := range names {
		name := filepath.Base(path)
		src, ok := sources[name]
		if !ok {
			t.Errorf("%s is not listed in SOURCES.tsv", name)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cf := corpusFile{name: name, url: src[0], version: src[1], detected: Detect(data),
			physical: bytes.Count(data, []byte("\n"))}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			cf.physical++
		}
		c, err := NewClassifier(cf.detected, ParseOptions{DefaultTime: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			t.Fatalf("%s: no file may be rejected: %v", name, err)
		}
		r := NewReader(bytes.NewReader(data), ReaderOptions{SingleLine: SingleLine(cf.detected)})
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			cf.records = append(cf.records, summarize(name, rec, c.Parse(rec)))
		}
		out = append(out, cf)
	}
	return out
}

func summarize(file string, rec Record, p Parsed) corpusRecord {
	cr := corpusRecord{File: file, Line: rec.LineNo, Family: p.Family, Format: p.Format, Status: p.Status,
		Kind: p.Kind, Event: p.Event, RID: p.RID, Room: p.BootstrapRoom, raw: string(rec.Raw)}
	if rec.Lines > 1 {
		cr.Lines = rec.Lines
	}
	if p.Status == StatusMalformed {
		cr.Reason = p.Reason
	}
	if !p.TS.IsZero() {
		cr.TS = p.TS.Format("2006-01-02T15:04:05.999999Z")
	}
	f := map[string]string{}
	put := func(k string, v any) {
		if s := fmt.Sprint(v); s != "" && s != "0" && s != "-1" {
			f[k] = s
		}
	}
	switch {
	case p.Boot != nil:
		b := p.Boot
		put("kv_tokens", b.KVPoolTokens)
		put("max_total_num_tokens", b.MaxTotalNumTokens)
		put("context_len", b.ContextLen)
		put("max_req_input_len", b.MaxReqInputLen)
		put("avail_mem_gb", b.AvailMemGB)
		put("tp", b.Ranks.TP)
	case p.Engine != nil:
		e := p.Engine
		put("event", e.Event)
		put("status_code", e.StatusCode)
		put("finish_type", e.FinishType)
		put("prompt_tokens", e.PromptTokens)
		put("path", e.Path)
		put("tp", e.Ranks.TP)
	case p.Batch != nil:
		b := p.Batch
		put("batch", b.Kind)
		put("running_req", b.RunningReq)
		put("queue_req", b.QueueReq)
		put("new_token", b.NewToken)
		put("token_usage", b.TokenUsage)
		put("transfer_req", b.TransferReq)
	case p.Transfer != nil:
		x := p.Transfer
		put("source", x.Source)
		put("peer", x.Peer)
		put("nic", x.NIC)
		put("reason", x.Reason)
		put("tp", x.Ranks.TP)
	case p.Gateway != nil:
		put("request_id", p.Gateway.RequestID)
		put("status", p.Gateway.Status)
	}
	if len(f) > 0 {
		cr.Fields = f
	}
	return cr
}

func TestCorpusGolden(t *testing.T) {
	files := readCorpus(t)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, cf := range files {
		for _, r := range cf.records {
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	golden := filepath.Join(corpusDir, "golden.jsonl")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	exp := strings.Split(strings.TrimSpace(string(want)), "\n")
	for i := 0; i < max(len(got), len(exp)); i++ {
		g, e := "", ""
		if i < len(got) {
			g = got[i]
		}
		if i < len(exp) {
			e = exp[i]
		}
		if g != e {
			t.Errorf("record %d:\n got  %s\n want %s", i, g, e)
		}
	}
}

// forensicMarkers name the facts the analyzers live on. They are matched on
// the raw text, independently of the parsers, so a new shape of one of
// these lines counts against the parsers instead of disappearing.
var forensicMarkers = []string{
	"KV Cache is allocated", "max_total_num_tokens=", "Prefill batch", "Decode batch", "bootstrap_room",
	"Worker: Process failed for slice", "Transfer failed for", "Transfer incomplete", "Failed to submit all transfers",
	"ASIO exception", "Failed to allocate slices", "Failed to mount segment", "Skip sending kv chunk",
	"Attempting to reconnect", "warm Up Failed", "Stream error from decode server", "Failed to select PD pair",
	"Lost connection with prefill", "Context is not active", "Failed to complete transfers",
	"Sync batch data transfer timeout", "exceeds the maximum", "Memory pool end", "Receive: obj=", "Finish: obj=",
}

func isForensic(raw string) bool {
	line := firstLine([]byte(raw))
	for _, m := range forensicMarkers {
		if strings.Contains(line, m) {
			return true
		}
	}
	return false
}

// TestCorpusCoverage: no file rejected, every line kept, ≥ 98% of forensic
// records parsed into a typed row. It also reports the share classified
// (parsed or known noise) and the unknown shapes, for review.
func TestCorpusCoverage(t *testing.T) {
	files := readCorpus(t)
	var lines, records, forensic, forensicParsed, classified int
	versions, threads := map[string]bool{}, map[string]bool{}
	for _, cf := range files {
		threads[cf.url] = true
		if cf.version != "-" && cf.version != "" {
			versions[cf.version] = true
		}
		kept := 0
		for _, r := range cf.records {
			kept += max(r.Lines, 1)
			records++
			if r.Status == StatusParsed || r.Status == StatusNoise {
				classified++
			}
			// A line that reads on its own must not be lost inside
			// another record (a traceback ran on over a prefix-less
			// "Prefill transfer failed …" in sglang #38552).
			for i, l := range strings.Split(r.raw, "\n")[1:] {
				if l = strings.TrimSuffix(l, "\r"); l != "" && l[0] != ' ' && l[0] != '\t' && knownMessage([]byte(l)) {
					t.Errorf("%s:%d: reads on its own but is inside the record of line %d: %.120s", r.File, r.Line+int64(i)+1, r.Line, l)
				}
			}
			if isForensic(r.raw) {
				forensic++
				if r.Status == StatusParsed && r.Kind != KindMarker && r.Kind != KindNone {
					forensicParsed++
				} else {
					t.Logf("forensic record not parsed: %s:%d %s %s", r.File, r.Line, r.Status, firstLine([]byte(r.raw)))
				}
			}
		}
		if kept != cf.physical {
			t.Errorf("%s: %d physical lines, %d kept in records", cf.name, cf.physical, kept)
		}
		lines += cf.physical
	}
	t.Logf("corpus: %d lines, %d records, %d threads, %d SGLang versions; forensic %d/%d parsed; classified %d/%d records (%.1f%%)",
		lines, records, len(threads), len(versions), forensicParsed, forensic, classified, records, 100*float64(classified)/float64(records))
	if forensic == 0 || float64(forensicParsed) < 0.98*float64(forensic) {
		t.Errorf("forensic records parsed: %d of %d, want ≥ 98%%", forensicParsed, forensic)
	}
}

// TestCorpusUnknownShapes lists what is still new to kvtrail (-v).
func TestCorpusUnknownShapes(t *testing.T) {
	for _, cf := range readCorpus(t) {
		for _, r := range cf.records {
			if r.Status == StatusUnknown {
				t.Logf("unknown %s:%d [%s] %.140s", r.File, r.Line, r.Family, firstLine([]byte(r.raw)))
			}
		}
	}
}
