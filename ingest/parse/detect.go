package parse

import (
	"bytes"
	"strings"
	"time"
)

// DetectSampleBytes is how much of a source Detect needs.
const DetectSampleBytes = 8 << 10

// Detect guesses the format of a source from its first few KB. Each
// complete line votes for the format it looks like; the format with most
// votes wins, FormatUnknown if no line is recognised. Callers can always
// override the result (New takes any Format).
func Detect(sample []byte) Format {
	if len(sample) > DetectSampleBytes {
		sample = sample[:DetectSampleBytes]
		if i := bytes.LastIndexByte(sample, '\n'); i > 0 {
			sample = sample[:i]
		}
	}
	votes := map[Format]int{}
	for len(sample) > 0 {
		line := sample
		if i := bytes.IndexByte(sample, '\n'); i >= 0 {
			line, sample = sample[:i], sample[i+1:]
		} else {
			sample = nil
		}
		if f := detectLine(string(bytes.TrimRight(line, "\r"))); f != FormatUnknown {
			votes[f]++
		}
	}
	best, n := FormatUnknown, 0
	for _, f := range Formats { // fixed order breaks ties deterministically
		if votes[f] > n {
			best, n = f, votes[f]
		}
	}
	// SGLang JSON request logs are also SGLang lines; one such line is
	// enough to call the source a request log.
	if best == FormatSGLang && votes[FormatSGLangJSON] > 0 && votes[FormatSGLangJSON]*2 >= votes[FormatSGLang] {
		best = FormatSGLangJSON
	}
	return best
}

func detectLine(line string) Format {
	switch {
	case line == "":
		return FormatUnknown
	case line[0] == '[':
		pre := parsePrefix(line, time.UTC)
		if pre.ts.IsZero() {
			return FormatUnknown
		}
		if strings.HasPrefix(pre.msg, "{") && strings.Contains(pre.msg, `"event": "request.`) {
			return FormatSGLangJSON
		}
		return FormatSGLang
	case line[0] == '{':
		switch {
		case strings.Contains(line, `"request_parameters"`):
			return FormatRequestMetrics
		case strings.Contains(line, `"pages"`) && strings.Contains(line, `"event"`):
			return FormatPageEvents
		case strings.Contains(line, `"level"`) && (strings.Contains(line, `"target"`) || strings.Contains(line, `"span"`) || strings.Contains(line, `"fields"`)):
			return FormatModelGateway
		case strings.Contains(line, `"request_id"`) || strings.Contains(line, `"tenant"`):
			return FormatGateway
		}
		return FormatUnknown
	case line[0] == '#':
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") || line == "# EOF" {
			return FormatPrometheus
		}
		return FormatUnknown
	case strings.HasPrefix(line, glogPreamble):
		return FormatGlog
	case strings.IndexByte("IWEF", line[0]) >= 0 && len(line) > 10 && (isDigits([]byte(line[1:5])) && line[5] == ' ' ||
		isDigits([]byte(line[1:9])) && line[9] == ' '):
		return FormatGlog
	case line[0] >= '0' && line[0] <= '9':
		if _, i, ok := parseDateTime(line, time.UTC); ok {
			rest := strings.TrimLeft(line[i:], " ")
			for _, lvl := range [...]string{"TRACE ", "DEBUG ", "INFO ", "WARN ", "ERROR "} {
				if strings.HasPrefix(rest, lvl) {
					// sgl-model-gateway targets are Rust paths.
					if strings.Contains(rest, "::") || strings.Contains(rest, ".rs:") {
						return FormatModelGateway
					}
					return FormatSGLang // user logging config (§0)
				}
			}
		}
		return FormatUnknown
	case strings.HasPrefix(line, "INFO:     "):
		return FormatSGLang
	}
	// A Prometheus sample: name{…} value or name value.
	if isIdentStart(line[0]) || line[0] == ':' {
		if _, err := parsePromSample(line); err == nil {
			return FormatPrometheus
		}
	}
	return FormatUnknown
}
