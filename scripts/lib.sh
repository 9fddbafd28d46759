# shellcheck shell=bash
# Shared helpers for kvtrail's scripts. Sourced, not run.

# step MSG: announce a step with the seconds since the script started, so a
# CI log shows where its minutes went (installs, checks, tests).
step() {
  echo "==> [${SECONDS}s] $*"
}

# need_apt PKG...: install the Debian packages that are missing. apt-get
# update runs only when something must be installed.
need_apt() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  step "installing ${missing[*]} (apt)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

need_go() {
  command -v go >/dev/null || { echo "Go is required (https://go.dev/dl); this machine image ships it at /usr/local/go" >&2; exit 1; }
}

# build_kvtrail: build ./bin/kvtrail from this checkout.
build_kvtrail() {
  step "building kvtrail"
  go build -o bin/kvtrail ./cmd/kvtrail
}

# need_chdb VERSION: make .cache/chdb/VERSION/libchdb.so present (ClickHouse
# as a shared library, from the npm package @chdb/lib-linux-x64-gnu; only the
# .so is taken, no Node code runs) and export CHDB_LIB_PATH to it. The
# download (178 MB packed, 566 MB unpacked) happens once; later runs reuse it.
need_chdb() {
  local version=$1 dir=".cache/chdb/$1"
  if [ ! -s "$dir/libchdb.so" ]; then
    command -v npm >/dev/null || need_apt npm
    step "fetching libchdb.so $version (npm pack @chdb/lib-linux-x64-gnu@$version)"
    local tmp
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvtrail-chdb.XXXXXX")
    (cd "$tmp" && npm pack --silent "@chdb/lib-linux-x64-gnu@$version" >/dev/null)
    tar -xzf "$tmp"/*.tgz -C "$tmp" package/libchdb.so
    mkdir -p "$dir"
    mv "$tmp/package/libchdb.so" "$dir/libchdb.so.part"
    mv "$dir/libchdb.so.part" "$dir/libchdb.so"
    rm -rf "$tmp"
  fi
  export CHDB_LIB_PATH
  CHDB_LIB_PATH="$PWD/$dir/libchdb.so"
}
