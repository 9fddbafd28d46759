package ingest_test

import (
	"io/fs"

	"github.com/kvtrail/kvtrail/migrations"
)

func migrationsFS() fs.FS { return migrations.FS }
