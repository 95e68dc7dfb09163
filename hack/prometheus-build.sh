#!/usr/bin/env bash
# Builds promtool from the Go module proxy into a cache folder outside the repo
# (beside the test bed's binaries), keyed by version, and prints that folder's bin/ path on its
# last line of stdout. prometheus/prometheus is never added to driverset's go.mod.
#
# A folder that is complete (its .done stamp exists) is reused as is. Cold: about 18 CPU-minutes
# (docs/observability.md has the measured wall time).
#
# Environment: DRIVERSET_TESTBED_CACHE (default ~/.cache/driverset-testbed).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=prometheus-versions.env
source "$here/prometheus-versions.env"

cache=${DRIVERSET_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/driverset-testbed}
out="$cache/prometheus-${PROMETHEUS_MODULE_VERSION}_$(go env GOOS)-$(go env GOARCH)"
bin="$out/bin"

log() { printf '[prometheus-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ -f "$out/.done" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$bin"
# One builder at a time: a second caller waits for the first instead of building twice.
exec 9>"$out/.lock"
if ! flock -n 9; then
  log "another build holds $out/.lock; waiting for it"
  flock 9
fi
if [[ -f "$out/.done" ]]; then
  echo "$bin"
  exit 0
fi

start=$SECONDS
log "building promtool ${PROMETHEUS_MODULE_VERSION} (log: $out/build.log)"
# Only promtool: the tests check and unit-test the alert rules with it; no test runs a Prometheus
# server yet, so its build (and its link) is not paid in CI.
if ! env GOFLAGS= CGO_ENABLED=0 GOBIN="$bin" go install -trimpath -ldflags "-s -w" \
  "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_MODULE_VERSION}" >"$out/build.log" 2>&1; then
  tail -n 40 "$out/build.log" >&2
  log "FAILED"
  exit 1
fi
"$bin/promtool" --version | head -1 >&2
touch "$out/.done"
log "ready in $((SECONDS - start)) s: $bin"
echo "$bin"
