#!/usr/bin/env bash
# The second README command: install what is missing and run every check:
# gofmt, go vet, staticcheck and the whole go test suite against a real
# ClickHouse that this script starts once for the run.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

STATICCHECK_VERSION=v0.8.2

need_go
need_apt clickhouse-server clickhouse-client docker-compose prometheus chromium zookeeper
echo "==> downloading Go modules"
go mod download
mkdir -p .cache/bin
if [ ! -x .cache/bin/staticcheck ] || ! .cache/bin/staticcheck -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
  echo "==> installing staticcheck $STATICCHECK_VERSION"
  GOBIN="$PWD/.cache/bin" GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi

echo "==> gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:" >&2; echo "$unformatted" >&2; exit 1
fi
echo "==> go vet"
go vet ./...
echo "==> staticcheck"
.cache/bin/staticcheck ./...

build_kvtrail
# One ClickHouse for the whole run; each test package gets its own databases.
chdir=$(mktemp -d /tmp/kvtrail-test-ch.XXXXXX)
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
echo "==> go test (ClickHouse at $KVTRAIL_TEST_CLICKHOUSE_ADDR)"
go test -count=1 -timeout 15m "$@" ./...
