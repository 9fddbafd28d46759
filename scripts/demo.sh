#!/usr/bin/env bash
# The first README command: install what is missing and run the demo.
# Starts a private ClickHouse under ./var/clickhouse (reused by later runs),
# applies the schema and serves kvtrail until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

need_go
need_apt clickhouse-server clickhouse-client
echo "==> downloading Go modules"
go mod download
build_kvtrail
exec ./bin/kvtrail demo "$@"
