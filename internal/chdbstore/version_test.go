package chdbstore

import (
	"os"
	"regexp"
	"testing"
)

// The scripts fetch the library release the code expects.
func TestScriptsFetchLibraryVersion(t *testing.T) {
	re := regexp.MustCompile(`(?m)^CHDB_VERSION=(\S+)$`)
	for _, script := range []string{"../../scripts/test.sh", "../../scripts/demo.sh"} {
		b, err := os.ReadFile(script)
		if err != nil {
			t.Fatal(err)
		}
		m := re.FindSubmatch(b)
		if m == nil || string(m[1]) != LibraryVersion {
			t.Errorf("%s: CHDB_VERSION %q, want %s", script, m, LibraryVersion)
		}
	}
}
