package parse

import (
	"strings"
	"time"
)

// This file is the one place that says which formats and line families
// kvtrail knows. To add a format: a constructor and its record splitting in
// formatSpecs. To add a line family (a shape of line, whatever file it is
// in): one entry in families with its shape test, the format whose parser
// reads it (or none), and what its lines are when that parser extracts
// nothing (known noise or unknown). Detect, New, the Classifier, SingleLine
// and `kvtrail formats check` all read these tables; docs/formats.md lists
// the families with the versions they were checked against.

// formatSpec says how to build a format's parser and how its records are
// split.
type formatSpec struct {
	newParser func(ParseOptions) (Parser, error)
	// singleLine: one record per physical line (JSON lines, Prometheus);
	// a leading space there is data, not a continuation.
	singleLine bool
}

var formatSpecs = map[Format]formatSpec{
	FormatSGLang:         {newParser: func(o ParseOptions) (Parser, error) { return &SGLangParser{opts: o}, nil }},
	FormatSGLangJSON:     {newParser: func(o ParseOptions) (Parser, error) { return &SGLangParser{opts: o}, nil }},
	FormatRequestMetrics: {newParser: func(o ParseOptions) (Parser, error) { return &requestMetricsParser{opts: o}, nil }, singleLine: true},
	FormatGlog:           {newParser: func(o ParseOptions) (Parser, error) { return &glogParser{opts: o}, nil }},
	FormatGateway:        {newParser: func(o ParseOptions) (Parser, error) { return newGatewayParser(o) }, singleLine: true},
	FormatModelGateway:   {newParser: func(o ParseOptions) (Parser, error) { return &modelGatewayParser{opts: o}, nil }, singleLine: true},
	FormatPrometheus: {newParser: func(o ParseOptions) (Parser, error) {
		return &promParser{opts: o, types: map[string]string{}}, nil
	}, singleLine: true},
	FormatPageEvents: {newParser: func(o ParseOptions) (Parser, error) { return &pageParser{opts: o}, nil }, singleLine: true},
}

// SingleLine reports whether records of format f are single physical
// lines. Unknown and mixed streams are read multi-line, so tracebacks and
// wrapped dumps stay one record.
func SingleLine(f Format) bool { return formatSpecs[f].singleLine }

// Family is one line family: a shape of line kvtrail recognises wherever
// it appears, whichever format its file was declared or detected as.
type Family struct {
	// Name is what `formats check` and docs/formats.md call the family.
	Name string
	// Format is the parser that reads the family's lines; FormatUnknown
	// means none (the family is recognised, nothing is extracted).
	Format Format
	// Match reports whether a record's first line has the family's shape.
	// It runs on every record, so it must be cheap.
	Match func(line string) bool
	// Noise reports whether a line of the family that its parser did not
	// extract is known noise (StatusNoise) rather than new to kvtrail
	// (StatusUnknown). Nil means never.
	Noise func(line string) bool
	// Marker, when set, makes every line of a parser-less family a parsed
	// KindMarker record with this event (a traceback is evidence, not
	// noise).
	Marker string
}

// families are tried in order; the first match wins, except that the
// families of the source's declared or detected format are tried first (the
// format is a tie-break hint). Keep cheap, specific shapes before broad ones.
var families = []Family{
	{Name: "blank", Match: func(l string) bool { return strings.TrimSpace(l) == "" }, Noise: always},
	{Name: "traceback", Match: func(l string) bool { return strings.HasPrefix(l, "Traceback (most recent call last):") }, Marker: "traceback"},
	{Name: "sglang-request-json", Format: FormatSGLangJSON, Match: isSGLangRequestJSON},
	{Name: "sglang", Format: FormatSGLang, Match: isSGLangBracket, Noise: sglangNoise},
	{Name: "mooncake-glog", Format: FormatGlog, Match: isGlog, Noise: glogNoise},
	{Name: "rust-tracing", Format: FormatModelGateway, Match: isRustTracing, Noise: tracingNoise},
	{Name: "python-logging", Format: FormatSGLang, Match: isPythonLogging, Noise: func(l string) bool {
		lvl, _, _ := dateLevel(l)
		return lvl == "INFO" || lvl == "DEBUG" || sglangNoise(l)
	}},
	{Name: "uvicorn", Format: FormatSGLang, Match: isUvicorn, Noise: func(l string) bool { return strings.HasPrefix(l, "INFO:") }},
	{Name: "request-metrics", Format: FormatRequestMetrics, Match: jsonWith(`"request_parameters"`)},
	{Name: "page-events", Format: FormatPageEvents, Match: func(l string) bool {
		return l != "" && l[0] == '{' && strings.Contains(l, `"pages"`) && strings.Contains(l, `"event"`)
	}},
	{Name: "tracing-json", Format: FormatModelGateway, Match: func(l string) bool {
		return l != "" && l[0] == '{' && strings.Contains(l, `"level"`) &&
			(strings.Contains(l, `"target"`) || strings.Contains(l, `"span"`) || strings.Contains(l, `"fields"`))
	}, Noise: tracingNoise},
	{Name: "gateway-json", Format: FormatGateway, Match: func(l string) bool {
		return l != "" && l[0] == '{' && (strings.Contains(l, `"request_id"`) || strings.Contains(l, `"tenant"`))
	}},
	{Name: "generate-response", Format: FormatSGLang, Match: func(l string) bool {
		return l != "" && (l[0] == '{' || l[0] == '[') && strings.Contains(l, `"meta_info"`)
	}},
	{Name: "prometheus", Format: FormatPrometheus, Match: isPrometheus},
	// Other engines' Python logging (vLLM workers next to Mooncake and
	// Dynamo): "INFO 03-19 17:02:01 cuda.py:230] …", "INFO 11-13 17:04:35 [x.py:84] …".
	{Name: "vllm", Match: isVLLM, Noise: func(l string) bool { return strings.HasPrefix(l, "INFO ") || strings.HasPrefix(l, "DEBUG ") }},
	// A fragment of a multi-line record whose head is not in the source
	// (an excerpt, a rotated file): read for known messages, else noise.
	{Name: "continuation", Format: FormatSGLang, Match: func(l string) bool { return l != "" && (l[0] == ' ' || l[0] == '\t') }, Noise: always},
	// Recognised lines with nothing to extract.
	{Name: "progress-bar", Match: isProgressBar, Noise: always},
	{Name: "nccl", Match: func(l string) bool { return strings.Contains(l, " NCCL INFO ") || strings.Contains(l, " NCCL WARN ") },
		Noise: func(l string) bool { return !strings.Contains(l, " NCCL WARN ") }},
	{Name: "gloo", Match: func(l string) bool { return strings.HasPrefix(l, "[Gloo]") }, Noise: always},
	{Name: "nixl", Match: func(l string) bool { return strings.HasPrefix(l, "NIXL ") || strings.HasPrefix(l, "[NIXL]") },
		Noise: func(l string) bool { return strings.HasPrefix(l, "NIXL INFO") || strings.HasPrefix(l, "[NIXL]") }},
	{Name: "py-spy", Match: isPySpy, Noise: always},
	// c10 (PyTorch C++) logging: "[rank1]:[W423 08:47:07.223722142 ProcessGroupGloo.cpp:727] Warning: …".
	{Name: "torch-c10", Match: isC10, Noise: func(l string) bool { return !strings.Contains(l, "]:[E") && !strings.HasPrefix(l, "[E") }},
	{Name: "python-warning", Match: isPythonWarning, Noise: always},
}

func always(string) bool { return true }

func isC10(l string) bool {
	if strings.HasPrefix(l, "[rank") {
		i := strings.Index(l, "]:[")
		if i < 0 || i > 12 {
			return false
		}
		l = l[i+2:]
	}
	// [W423 08:47:07.2…: the month is not zero-padded.
	return len(l) > 7 && l[0] == '[' && strings.IndexByte("IWEF", l[1]) >= 0 && isDigits([]byte(l[2:5])) &&
		(l[5] == ' ' || isDigits([]byte(l[5:6])) && l[6] == ' ')
}

func isVLLM(l string) bool {
	lvl, rest, ok := strings.Cut(l, " ")
	switch lvl {
	case "INFO", "DEBUG", "WARNING", "ERROR", "CRITICAL":
	default:
		return false
	}
	// MM-DD HH:MM:SS
	return ok && len(rest) > 15 && rest[2] == '-' && rest[5] == ' ' && rest[8] == ':' && rest[11] == ':' &&
		isDigits([]byte(rest[0:2])) && isDigits([]byte(rest[3:5]))
}

// stripWrapper removes what a launcher or collector put in front of a
// process's own line: docker compose ("sglang-1  | "), Ray and vLLM worker
// tags ("(SGLangWorker pid=1107016) "), kubectl --prefix ("[pod/p/c] ").
// It returns the number of bytes removed.
func stripWrapper(l string) int {
	n := 0
	for range 3 {
		rest := l[n:]
		k := 0
		switch {
		case strings.HasPrefix(rest, "("):
			e := strings.Index(rest, ") ")
			if e > 0 && e < 80 && strings.Contains(rest[:e], " pid=") {
				k = e + 2
			}
		case strings.HasPrefix(rest, "[pod/"):
			if e := strings.Index(rest, "] "); e > 0 {
				k = e + 2
			}
		default:
			// Only a separator starting before byte 64 counts, so only
			// that much of a (possibly long) line is searched.
			if e := strings.Index(rest[:min(len(rest), 66)], " | "); e > 0 && e < 64 {
				name := strings.TrimRight(rest[:e], " ")
				if name != "" && !strings.ContainsAny(name, " []") {
					k = e + 3
					if k < len(rest) && rest[k] == ' ' && e+4 <= len(rest) && strings.TrimSpace(rest[k:]) == "" {
						k = len(rest)
					}
				}
			} else if strings.HasSuffix(rest, " |") && len(rest) < 64 && !strings.ContainsAny(strings.TrimRight(rest[:len(rest)-2], " "), " []") {
				k = len(rest) // "sglang-1  |": an empty line of the service
			}
		}
		if k == 0 {
			break
		}
		n += k
	}
	return n
}

// Families returns the registered line families in match order.
func Families() []Family { return append([]Family(nil), families...) }

func jsonWith(field string) func(string) bool {
	return func(l string) bool { return l != "" && l[0] == '{' && strings.Contains(l, field) }
}

// isSGLangBracket: "[2026-08-20 10:11:12 DP0 TP0] …", "[…][file.py:1][INFO]: …" (§0).
func isSGLangBracket(l string) bool {
	return len(l) > 20 && l[0] == '[' && !parsePrefix(l, time.UTC).ts.IsZero()
}

func isSGLangRequestJSON(l string) bool {
	if len(l) <= 20 || l[0] != '[' {
		return false
	}
	pre := parsePrefix(l, time.UTC) // isSGLangBracket, without parsing the prefix twice
	return !pre.ts.IsZero() && strings.HasPrefix(pre.msg, "{") && strings.Contains(pre.msg, `"event": "request.`)
}

// isGlog: "E0917 16:23:13.204995 4058290 worker_pool.cpp:294] …" and the
// 4-digit-year form of newer glog builds (§g), and the glog preamble.
func isGlog(l string) bool {
	if strings.HasPrefix(l, glogPreamble) {
		return true
	}
	return len(l) > 10 && strings.IndexByte("IWEF", l[0]) >= 0 &&
		(isDigits([]byte(l[1:5])) && l[5] == ' ' || isDigits([]byte(l[1:9])) && l[9] == ' ')
}

// glogNoise: an INFO line the glog parser did not extract is transfer-engine
// chatter (topology, handshake, metrics); W/E/F lines stay unknown for review.
func glogNoise(l string) bool { return strings.HasPrefix(l, "I") }

// dateLevel splits "2025-08-01 00:41:58  INFO rest" (tracing text, Python
// logging with a user format, Dynamo) into level and rest.
func dateLevel(l string) (level, rest string, ok bool) {
	if len(l) < 20 || l[0] < '0' || l[0] > '9' {
		return "", "", false
	}
	_, i, ok := parseDateTime(l, time.UTC)
	if !ok {
		return "", "", false
	}
	rest = strings.TrimLeft(l[i:], " ")
	// "%(asctime)s - %(name)s - %(levelname)s - %(message)s"
	if strings.HasPrefix(rest, "- ") {
		rest = rest[2:]
		if j := strings.Index(rest, " - "); j > 0 && j < 60 {
			if lvl, msg, ok := strings.Cut(rest[j+3:], " - "); ok {
				switch lvl {
				case "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL":
					return lvl, rest[:j] + ": " + msg, true
				}
			}
		}
	}
	for _, lvl := range [...]string{"TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "CRITICAL"} {
		if strings.HasPrefix(rest, lvl+" ") || strings.HasPrefix(rest, lvl+":") {
			return lvl, strings.TrimLeft(rest[len(lvl)+1:], " "), true
		}
	}
	return "", "", false
}

// isRustTracing: tracing text of sgl-router / sgl-model-gateway / Dynamo's
// Rust runtime; its target is a Rust path.
func isRustTracing(l string) bool {
	_, rest, ok := dateLevel(l)
	if !ok {
		return false
	}
	target, _, _ := strings.Cut(rest, " ")
	return strings.Contains(target, "::") || strings.Contains(rest, ".rs:")
}

func tracingNoise(l string) bool {
	if l != "" && l[0] == '{' {
		return strings.Contains(l, `"level":"INFO"`) || strings.Contains(l, `"level":"DEBUG"`) || strings.Contains(l, `"level":"TRACE"`)
	}
	lvl, _, _ := dateLevel(l)
	return lvl == "INFO" || lvl == "DEBUG" || lvl == "TRACE"
}

// isPythonLogging: SGLang lines written through a user logging config or
// by Dynamo's Python workers: "2025-…Z  INFO memory_pool._finalize_allocation_log: …".
func isPythonLogging(l string) bool {
	_, _, ok := dateLevel(l)
	return ok && !isRustTracing(l)
}

func isUvicorn(l string) bool {
	return strings.HasPrefix(l, "INFO:     ") || strings.HasPrefix(l, "WARNING:  ") || strings.HasPrefix(l, "ERROR:    ")
}

func isPrometheus(l string) bool {
	if l == "" {
		return false
	}
	if l[0] == '#' {
		return strings.HasPrefix(l, "# HELP ") || strings.HasPrefix(l, "# TYPE ") || l == "# EOF"
	}
	if !isIdentStart(l[0]) && l[0] != ':' {
		return false
	}
	return promCheck(l)
}

// isProgressBar: tqdm bars (weights loading, CUDA graph capture, benches),
// including SGLang's "… 50% Completed | 1/2 [00:01<00:01, 1.51s/it]".
func isProgressBar(l string) bool {
	return strings.Contains(l, "it/s]") || strings.Contains(l, "s/it]") || strings.Contains(l, "?it/s") ||
		strings.Contains(l, "% Completed |") || (strings.Contains(l, "%|") && strings.Contains(l, "/"))
}

// isPySpy: py-spy dump headers ("Process 123: sglang::scheduler_DP1_TP1_EP1_PP0",
// "Python v3.10.12 (…)", "Thread 0x7F… (idle): \"MainThread\"").
func isPySpy(l string) bool {
	if strings.HasPrefix(l, "Process ") {
		n, rest, ok := strings.Cut(l[len("Process "):], ": ")
		return ok && isDigits([]byte(n)) && rest != ""
	}
	if strings.HasPrefix(l, "Python v") {
		return len(l) > 8 && l[8] >= '0' && l[8] <= '9'
	}
	return strings.HasPrefix(l, "Thread 0x") || strings.HasPrefix(l, "Thread ") && strings.Contains(l, `): "`)
}

// isPythonWarning: "/usr/…/x.py:123: UserWarning: …" as printed by warnings.
func isPythonWarning(l string) bool {
	i := strings.Index(l, ".py:")
	if i < 0 || !(strings.HasPrefix(l, "/") || strings.HasPrefix(l, "<frozen")) {
		return false
	}
	return strings.Contains(l[i:], "Warning: ")
}

// sglangNoiseMessages are SGLang (and library) messages that say nothing
// kvtrail's analyzers use: startup progress, CUDA graph capture, torch
// distributed init, chat templates, server start. Prefix matches on the
// message after the line prefix.
var sglangNoiseMessages = []string{
	"Init torch distributed", "Load weight begin", "Loading weights", "Using model weights format",
	"Capture cuda graph", "Capture CUDA graph", "Capture piecewise CUDA graph", "Capturing batches",
	"Using KV cache dtype", "Using default chat sampling params", "Using default HuggingFace chat template",
	"Using a chat_template", "Detected the chat template", "Use chat template", "Attention backend",
	"Started server process", "Waiting for application startup", "Application startup complete",
	"Uvicorn running on", "Ignore import error", "Multimodal is disabled", "Automatically",
	"Start of prefill warmup", "End of prefill disaggregation mode warmup", "Shutting down", "Finished server process",
	"Inference server", "Overlap scheduler", "Chunked prefix cache", "Mooncake Configuration loaded",
	"Cache flushed successfully", "Downcasting torch.float32", "Registering", "Setting ",
	"The server is fired up", "Health check", "Entering DeepGEMM", "DeepGEMM", "Using ",
	"Context: ", "Disable ", "Enable ", "Init mooncake", "Init ", "Load ", "KV cache is",
	"Worker process", "Model is", "FlashInfer", "flashinfer", "Parameter ",
	"#parameters", "Skipping import", "Model config", "Register",
	"Tokenizer", "Config", "NCCL version", "sglang version", "SGLang version", "Capture ", "Sleep", "Warmup",
	"Mooncake store setup", "Mooncake store warmup", "Connect to Mooncake store", "MOE_RUNNER_BACKEND",
	"sglang is using nccl", "Found local HF snapshot", "Pyspy dump for PID", "WARNING:  Invalid HTTP request",
	// v0.5.16+ PD warmup (http_server.py, #30748); its failure is read (warmup_failed).
	"Start of pd disaggregation warmup", "Disaggregation warmup requests completed", "End of disaggregation warmup",
	// KV budget set aside before the pool is sized (v0.5.19 era); the pool
	// line after it carries the size kvtrail reads.
	"Reserving ",
	// The tokenizer's flood for a request it dropped that the scheduler
	// still decodes (a "zombie" after a client disconnect, sglang #36333).
	"Received output for rid=",
}

// sglangNoise reports whether an SGLang line's message is known noise.
func sglangNoise(l string) bool {
	msg := parsePrefix(l, time.UTC).msg
	if _, rest, ok := dateLevel(l); ok {
		// "logger.func: message" of Python logging forms.
		if _, m, ok := strings.Cut(rest, ": "); ok {
			msg = m
		}
	}
	msg = strings.TrimLeft(msg, " ")
	if strings.HasPrefix(msg, "INFO:") {
		return true // uvicorn startup/shutdown lines that are not access lines
	}
	for _, m := range sglangNoiseMessages {
		if strings.HasPrefix(msg, m) {
			return true
		}
	}
	return false
}

// classifyLine returns the family of a record's first line, preferring the
// hint format's families; ok is false for a line of no known shape.
func classifyLine(line string, hint Format) (Family, bool) {
	if hint != FormatUnknown && hint != "" {
		for _, f := range families {
			if sameFormat(f.Format, hint) && f.Match(line) {
				return f, true
			}
		}
		// A JSON object in a source declared as a JSON format is that
		// format's, whatever fields it has (a user's access log read through
		// a field mapping need not look like any known shape).
		if line != "" && line[0] == '{' {
			switch hint {
			case FormatGateway, FormatRequestMetrics, FormatPageEvents:
				return Family{Name: string(hint), Format: hint, Match: func(string) bool { return true }}, true
			}
		}
	}
	for _, f := range families {
		if f.Match(line) {
			return f, true
		}
	}
	return Family{}, false
}

// sameFormat: SGLang text and request-JSON logs share one parser.
func sameFormat(a, b Format) bool {
	if a == b {
		return true
	}
	return (a == FormatSGLang || a == FormatSGLangJSON) && (b == FormatSGLang || b == FormatSGLangJSON)
}
