#!/usr/bin/env bash
# The second README command: install what is missing and run every check:
# gofmt, go vet, staticcheck and the whole go test suite against a real
# ClickHouse that this script starts once for the run.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

STATICCHECK_VERSION=v0.8.2
# ClickHouse 26.7 as a library, for the modern-engine tier (docs/clickhouse.md).
CHDB_VERSION=26.7.3-stable.1

need_go
need_apt clickhouse-server clickhouse-client docker-compose prometheus chromium zookeeper
step "downloading Go modules"
go mod download
need_chdb "$CHDB_VERSION"
mkdir -p .cache/bin
if [ ! -x .cache/bin/staticcheck ] || ! .cache/bin/staticcheck -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
  step "installing staticcheck $STATICCHECK_VERSION"
  GOBIN="$PWD/.cache/bin" GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:" >&2; echo "$unformatted" >&2; exit 1
fi
step "go vet"
go vet ./...
# The modern-engine tier's tests build only with the chdb tag (they need the
# library); internal/chdbstore itself is in the default build.
go vet -tags chdb ./internal/chdbstore/ ./internal/chdbtier/
step "staticcheck"
.cache/bin/staticcheck ./...
.cache/bin/staticcheck -tags chdb ./internal/chdbstore/ ./internal/chdbtier/

build_kvtrail
# One ClickHouse for the whole run; each test package gets its own databases.
# The server's data and the tests' temporary files (simulated incidents,
# the test clusters' servers) go to memory when /dev/shm has room: the
# suite creates and drops thousands of tables and parts, and on disk the
# server spent much of its time in the kernel's file-system code
# (internal/chstore's tests alone: 138 s on disk, 112 s in memory). The
# suite's peak there was 2.1 GB. Nothing here tests what survives a power
# cut; the crash tests kill processes. KVTRAIL_TEST_SCRATCH picks the place.
scratch=${KVTRAIL_TEST_SCRATCH:-/tmp}
if [ -z "${KVTRAIL_TEST_SCRATCH:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] &&
  [ "$(df -Pk /dev/shm | awk 'NR==2 {print $4}')" -ge $((8 * 1024 * 1024)) ]; then
  scratch=/dev/shm
fi
chdir=$(mktemp -d "$scratch/kvtrail-test.XXXXXX")
mkdir -p "$chdir/tmp"
addrfile="$chdir/addr"
./bin/kvtrail clickhouse run --data-dir "$chdir/ch" --addr-file "$addrfile" --log-level warn >"$chdir/run.log" 2>&1 &
chpid=$!
cleanup() { kill "$chpid" 2>/dev/null || true; wait "$chpid" 2>/dev/null || true; rm -rf "$chdir"; }
trap cleanup EXIT
for _ in $(seq 1 600); do
  [ -s "$addrfile" ] && break
  kill -0 "$chpid" 2>/dev/null || { cat "$chdir/run.log" >&2; exit 1; }
  sleep 0.1
done
[ -s "$addrfile" ] || { echo "ClickHouse did not start:" >&2; cat "$chdir/run.log" >&2; exit 1; }
export KVTRAIL_TEST_CLICKHOUSE_ADDR
KVTRAIL_TEST_CLICKHOUSE_ADDR=$(cat "$addrfile")
# Every statement the server accepts during the suite is recorded here
# (internal/sqlcapture) and replayed on ClickHouse 26.7 afterwards.
export KVT_SQL_CAPTURE="$chdir/statements.jsonl"
: >"$KVT_SQL_CAPTURE"
step "go test (ClickHouse at $KVTRAIL_TEST_CLICKHOUSE_ADDR, scratch in $scratch)"
TMPDIR="$chdir/tmp" go test -count=1 -timeout 15m "$@" ./...
step "modern-engine tier (ClickHouse 26.7 in-process, $(wc -l <"$KVT_SQL_CAPTURE") captured statements)"
KVT_SQL_REPLAY="$KVT_SQL_CAPTURE" KVT_SQL_CAPTURE= \
  go test -tags chdb -count=1 -timeout 10m ./internal/chdbstore/ ./internal/chdbtier/
step "all checks passed"
