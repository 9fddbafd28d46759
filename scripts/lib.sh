# shellcheck shell=bash
# Shared helpers for kvtrail's scripts. Sourced, not run.

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
  echo "==> installing ${missing[*]} (apt)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

need_go() {
  command -v go >/dev/null || { echo "Go is required (https://go.dev/dl); this machine image ships it at /usr/local/go" >&2; exit 1; }
}

# build_kvtrail: build ./bin/kvtrail from this checkout.
build_kvtrail() {
  echo "==> building kvtrail"
  go build -o bin/kvtrail ./cmd/kvtrail
}
