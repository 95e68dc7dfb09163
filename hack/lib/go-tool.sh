# shellcheck shell=bash
# go_tool_install: the one way hack/*-build.sh build a Go tool from the module proxy into a cache
# folder outside the repo (beside the test bed's binaries), keyed by name and version, and print
# that folder's bin/ path on the last line of stdout.
#
#   go_tool_install NAME VERSION PACKAGE@VERSION LDFLAGS CHECK...
#
# NAME names the folder and the log lines; CHECK is the built tool's version command, run once
# after the build (its output on stderr). A folder that is complete (its .done stamp exists) is
# reused as is; one builder at a time (a second caller waits on the folder's lock instead of
# building twice). `go install` builds the tool with its own go.mod: nothing is added to
# driverset's modules. Environment: DRIVERSET_TESTBED_CACHE (default ~/.cache/driverset-testbed).
go_tool_install() {
  local name=$1 version=$2 pkg=$3 ldflags=$4
  shift 4
  local cache=${DRIVERSET_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/driverset-testbed}
  local out bin start
  out="$cache/${name}-${version}_$(go env GOOS)-$(go env GOARCH)"
  bin="$out/bin"
  log() { printf '[%s-build %s] %s\n' "$name" "$(date +%H:%M:%S)" "$*" >&2; }

  if [[ -f "$out/.done" ]]; then
    echo "$bin"
    return 0
  fi
  mkdir -p "$bin"
  exec 9>"$out/.lock"
  if ! flock -n 9; then
    log "another build holds $out/.lock; waiting for it"
    flock 9
  fi
  if [[ -f "$out/.done" ]]; then
    echo "$bin"
    return 0
  fi

  start=$SECONDS
  log "building $pkg (log: $out/build.log)"
  # From inside the cache folder, so that no go.mod or go.work of the caller's is in play.
  if ! (cd "$out" && env GOWORK=off GOFLAGS= CGO_ENABLED=0 GOBIN="$bin" go install -trimpath \
    -ldflags "$ldflags" "$pkg") >"$out/build.log" 2>&1; then
    tail -n 40 "$out/build.log" >&2
    log "FAILED"
    return 1
  fi
  "$bin/$(basename "${pkg%@*}")" "$@" 2>&1 | head -1 >&2
  touch "$out/.done"
  log "ready in $((SECONDS - start)) s: $bin"
  echo "$bin"
}
