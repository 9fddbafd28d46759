package parse

import (
	"bytes"
)

// DetectSampleBytes is how much of a source Detect needs.
const DetectSampleBytes = 8 << 10

// Detect guesses the format of a source from its first few KB. Each
// complete line votes for the format it looks like; the format with most
// votes wins, FormatUnknown if no line is recognised. The result is only a
// hint: the Classifier reads every line by its own shape, and a source of
// unknown format is still ingested.
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

// detectLine is the format a line votes for: that of its family
// (registry.go), FormatUnknown for parser-less families and unknown shapes.
func detectLine(line string) Format {
	if line == "" {
		return FormatUnknown
	}
	f, ok := classifyLine(line, FormatUnknown)
	if !ok {
		return FormatUnknown
	}
	return f.Format
}
