package posture

import (
	"regexp"
	"strconv"
	"strings"
)

// Version is a parsed SGLang release number: 0.5.11, v0.5.4.post1,
// 0.5.13.post1-cu130, 0.5.2rc1. Pre-releases order before the release.
type Version struct {
	Major, Minor, Patch int
	Post                int // .postN
	RC                  int // rcN; 0 = not a release candidate
	Text                string
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)(?:rc(\d+))?(?:\.post(\d+))?`)

// ParseVersion parses s; ok is false when s is not a version number.
func ParseVersion(s string) (Version, bool) {
	s = strings.TrimSpace(s)
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return Version{}, false
	}
	n := func(i int) int {
		if m[i] == "" {
			return 0
		}
		v, _ := strconv.Atoi(m[i])
		return v
	}
	return Version{Major: n(1), Minor: n(2), Patch: n(3), RC: n(4), Post: n(5), Text: strings.TrimPrefix(m[0], "v")}, true
}

// Compare returns -1, 0 or 1 as v is older than, equal to or newer than o.
func (v Version) Compare(o Version) int {
	for _, d := range [...][2]int{{v.Major, o.Major}, {v.Minor, o.Minor}, {v.Patch, o.Patch}} {
		if d[0] != d[1] {
			return sign(d[0] - d[1])
		}
	}
	// 0.5.2rc1 < 0.5.2 (RC 0 means the release itself).
	if v.RC != o.RC {
		switch {
		case v.RC == 0:
			return 1
		case o.RC == 0:
			return -1
		}
		return sign(v.RC - o.RC)
	}
	return sign(v.Post - o.Post)
}

func sign(d int) int {
	switch {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return 0
}

// Version lines a node's logs may carry near a boot. SGLang itself does
// not log its version at startup, so these come from what operators add:
// `python -m sglang.check_env` ("sglang: 0.5.11"), `pip freeze`
// ("sglang==0.5.11") or the "SGLang version: 0.5.11" form of bug reports.
var versionLineRE = regexp.MustCompile(`(?i)(?:^|[\s\]|,;])sglang(?:==|:\s+|\s+version\s*[:=]\s*)v?(\d+\.\d+\.\d+(?:rc\d+)?(?:\.post\d+)?)`)

// versionFromLine returns the SGLang version a line states, if any.
func versionFromLine(line string) (string, bool) {
	m := versionLineRE.FindStringSubmatch(line)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// DeferredReleaseEnv is the switch for deferred decode-side KV release
// (sgl-project/sglang PR #35049; default off).
const DeferredReleaseEnv = "SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE"

var (
	envLineRE     = regexp.MustCompile(`(?:^|[\s\]])(SGLANG_[A-Z0-9_]+)\s*[=:]\s*"?'?([^\s"',]*)`)
	deferredValRE = regexp.MustCompile(`(?:^|[\s\]])` + DeferredReleaseEnv + `\s*[=:]\s*"?'?([^\s"',]*)`)
)

// envDumpLine reports whether line is an environment-dump line
// (SGLANG_X=value or SGLANG_X: value) and, when it sets the deferred
// release switch, its value.
func envDumpLine(line string) (isEnv bool, deferred string, hasDeferred bool) {
	if !envLineRE.MatchString(line) {
		return false, "", false
	}
	if m := deferredValRE.FindStringSubmatch(line); m != nil {
		return true, m[1], true
	}
	return true, "", false
}

// truthy reads a switch value: 1, true, yes, on (any case) are on.
func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on", "y":
		return true
	}
	return false
}
