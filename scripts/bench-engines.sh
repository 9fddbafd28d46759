#!/usr/bin/env bash
# Embedded engine (ClickHouse 26.7 in kvtrail's process) against the managed
# ClickHouse 18.16 server, on the same simulated incident, in one run:
# `kvtrail ingest` and `kvtrail analyze` timed on each engine, with peak RSS
# (kvtrail's, plus clickhouse-server's for the server), then
# `kvtrail bench ingest` (the server's ratio to clickhouse-client) and
# `kvtrail bench analyze` on each engine. Figures: README, docs/clickhouse.md.
#
#   ./scripts/bench-engines.sh [SCALE] [RUNS]     (default 0.1, the demo's; 1)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

CHDB_VERSION=26.7.3-stable.1
scale=${1:-0.1}
runs=${2:-1}
need_go
need_apt clickhouse-server clickhouse-client
if [ -z "${CHDB_LIB_PATH:-}" ] || [ ! -s "$CHDB_LIB_PATH" ]; then
  need_chdb "$CHDB_VERSION"
fi
export CHDB_LIB_PATH
build_kvtrail
kv=$PWD/bin/kvtrail
work=$(mktemp -d "${TMPDIR:-/tmp}/kvtrail-bench-engines.XXXXXX")
chpid=""
cleanup() { [ -n "$chpid" ] && kill "$chpid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

"$kv" simulate --scale "$scale" --out "$work/sim" | tail -1
manifest=$work/sim/sources.yaml

# timed LABEL CMD...: run CMD, print its wall time and peak RSS.
timed() {
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >"$work/out" 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
  read -r secs kb <"$work/time"
  printf '  %-34s %8.1fs  peak RSS %5d MB\n' "$label" "$secs" $((kb / 1024))
}

# vmhwm PID: a process's peak RSS in MB.
vmhwm() { awk '/VmHWM/ {print int($2/1024)}' "/proc/$1/status"; }

for run in $(seq 1 "$runs"); do
  echo "== run $run of $runs (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  echo "server (ClickHouse $(clickhouse-client --version 2>/dev/null | grep -o '[0-9][0-9.]*[0-9]' | head -1), its own process):"
  rm -rf "$work/ch" "$work/addr"
  "$kv" clickhouse run --data-dir "$work/ch" --addr-file "$work/addr" --log-level warn >"$work/ch.log" 2>&1 &
  chpid=$!
  for _ in $(seq 1 600); do [ -s "$work/addr" ] && break; sleep 0.1; done
  server=(--clickhouse-addr "$(cat "$work/addr")" --clickhouse-database "bench_$run")
  timed "kvtrail ingest" "$kv" "${server[@]}" ingest --manifest "$manifest"
  timed "kvtrail analyze" "$kv" "${server[@]}" analyze
  echo "  clickhouse-server peak RSS: $(vmhwm "$(cat "$work/ch/pid")") MB"
  "$kv" "${server[@]}" findings --format json | wc -l | xargs printf '  findings: %s\n'
  kill "$chpid"; wait "$chpid" 2>/dev/null || true; chpid=""

  echo "embedded (ClickHouse 26.7 in kvtrail's process):"
  rm -rf "$work/emb"
  embedded=(--engine embedded --clickhouse-database "bench_$run")
  export KVTRAIL_LOCAL_EMBEDDED_DIR=$work/emb
  timed "kvtrail ingest" "$kv" "${embedded[@]}" ingest --manifest "$manifest"
  timed "kvtrail analyze" "$kv" "${embedded[@]}" analyze
  "$kv" "${embedded[@]}" --log-level warn findings --format json | wc -l | xargs printf '  findings: %s\n'
  du -sm "$work/emb" | cut -f1 | xargs printf '  store on disk: %s MB\n'
  unset KVTRAIL_LOCAL_EMBEDDED_DIR
done

echo "== kvtrail bench ingest (managed server; its baseline is clickhouse-client)"
(cd "$work" && "$kv" bench ingest --dir "$work/sim" --data-dir "$work/ch2" --log-level warn)
echo "== kvtrail bench analyze, server"
(cd "$work" && "$kv" bench analyze --scale "$scale" --data-dir "$work/ch3" --log-level warn)
echo "== kvtrail bench analyze, embedded"
(cd "$work" && KVTRAIL_LOCAL_EMBEDDED_DIR=$work/emb2 "$kv" bench analyze --engine embedded --scale "$scale" --log-level warn)
