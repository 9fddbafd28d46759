#!/usr/bin/env bash
# The first README command: install what is missing and run the demo.
# Starts a private ClickHouse under ./var/clickhouse (reused by later runs),
# applies the schema and serves kvtrail until Ctrl-C.
#
# With --engine embedded (or KVTRAIL_CLICKHOUSE_ENGINE=embedded) no
# ClickHouse server is installed or started: kvtrail runs ClickHouse 26.7
# inside its own process from libchdb.so, fetched once into .cache/chdb/
# (npm pack; 178 MB download), with its data under ./var/embedded.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

# The chdb release the embedded engine is tested with (the same as
# scripts/test.sh and internal/chdbstore.LibraryVersion).
CHDB_VERSION=26.7.3-stable.1

engine=${KVTRAIL_CLICKHOUSE_ENGINE:-server}
prev=""
for arg in "$@"; do
  case "$arg" in
    --engine=*) engine=${arg#--engine=} ;;
  esac
  [ "$prev" = "--engine" ] && engine=$arg
  prev=$arg
done

need_go
if [ "$engine" = embedded ]; then
  # A library named by CHDB_LIB_PATH is used as it is.
  if [ -z "${CHDB_LIB_PATH:-}" ] || [ ! -s "$CHDB_LIB_PATH" ]; then
    need_chdb "$CHDB_VERSION"
  fi
else
  need_apt clickhouse-server clickhouse-client
fi
step "downloading Go modules"
go mod download
build_kvtrail
exec ./bin/kvtrail demo "$@"
