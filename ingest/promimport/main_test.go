package promimport

import (
	"testing"

	"github.com/kvtrail/kvtrail/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }
