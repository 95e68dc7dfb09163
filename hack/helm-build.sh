#!/usr/bin/env bash
# Builds the helm CLI into a cache folder outside the repo (beside the test bed's binaries), from
# the helm module e2e/go.mod pins (the one harness.RenderChart renders the chart with, so the CLI
# the docs' commands run and the tests' renders are the same Helm), and prints that folder's bin/
# path on its last line of stdout. `go install helm.sh/helm/v3/cmd/helm@VERSION` builds it with
# helm's own go.mod, as helm's releases are built: nothing is added to e2e/go.mod.
#
# A folder that is complete (its .done stamp exists) is reused as is. Cold: about 3.5 min on a
# shared 2-core machine, most of it downloading and compiling helm's dependencies
# (docs/measurements.md); warm: a file test.
#
# Environment: DRIVERSET_TESTBED_CACHE (default ~/.cache/driverset-testbed).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# The one place the version is decided: e2e/go.mod's requirement.
version=$(cd "$here/../e2e" && GOWORK=off GOFLAGS= go list -m -f '{{.Version}}' helm.sh/helm/v3)

cache=${DRIVERSET_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/driverset-testbed}
out="$cache/helm-${version}_$(go env GOOS)-$(go env GOARCH)"
bin="$out/bin"

log() { printf '[helm-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

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
log "building helm ${version} (log: $out/build.log)"
# The version stamped as helm's release Makefile does, so that `helm version` names it.
if ! (cd "$out" && env GOWORK=off GOFLAGS= CGO_ENABLED=0 GOBIN="$bin" go install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${version}" \
  "helm.sh/helm/v3/cmd/helm@${version}") >"$out/build.log" 2>&1; then
  tail -n 40 "$out/build.log" >&2
  log "FAILED"
  exit 1
fi
"$bin/helm" version --short >&2
touch "$out/.done"
log "ready in $((SECONDS - start)) s: $bin"
echo "$bin"
