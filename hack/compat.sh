#!/usr/bin/env bash
# make compat: the scenarios of hack/compat-tests.txt, which between them use every Kubernetes
# API driverset relies on, on each Kubernetes version of COMPAT_VERSIONS (default: the oldest the
# chart claims, COMPAT_OLDEST_KUBERNETES, and the test bed's own), one version after the other;
# then one table of the scenarios by version (hack/compattable). Exits 1 when a scenario failed or
# did not run on any version.
#
# The pinned version runs on the test bed's own binaries (make testbed-bin); any other on a
# bed of KWOK nodes built alike from the module proxy (hack/testbed-build.sh with
# DRIVERSET_TESTBED_KUBERNETES and DRIVERSET_TESTBED_KWOK_ONLY: 20-40 min cold, then cached).
# Each run's go test -json and the table are kept in COMPAT_OUT (default /tmp/driverset-compat).
set -euo pipefail
# Each module on its own (e2e/ is one, with its own go.mod), as make runs them: a go.work of your
# own would otherwise change what go list -m and go test see.
export GOWORK=off

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=testbed-versions.env
source hack/testbed-versions.env
pinned=$KUBERNETES_VERSION
versions=${COMPAT_VERSIONS:-"$COMPAT_OLDEST_KUBERNETES $pinned"}
out=${COMPAT_OUT:-/tmp/driverset-compat}
mkdir -p "$out"

{ read -r pkgs; read -r pattern; } < <(go run ./hack/compattable -tests hack/compat-tests.txt -pattern)
# The scenarios live in the test harness's module (e2e/go.mod): go test runs there, on their
# import paths (what the table reads back from go test -json).
module=$(go list -m)
read -r -a paths <<<"$pkgs"
paths=("${paths[@]/#.\//$module/}")

args=()
for v in $versions; do
  if [[ "$v" == "$pinned" ]]; then
    bin=$(hack/testbed-build.sh | tail -n 1)
  else
    bin=$(DRIVERSET_TESTBED_KUBERNETES="$v" DRIVERSET_TESTBED_KWOK_ONLY=1 hack/testbed-build.sh | tail -n 1)
  fi
  echo "compat: Kubernetes $v ($("$bin/kube-apiserver" --version)), $(date -u +%FT%TZ): go test -run '$pattern' $pkgs" >&2
  start=$SECONDS
  # A failing scenario is the table's to report: go test's status is not the script's.
  (cd e2e && DRIVERSET_TESTBED_BIN="$bin" go test -tags testbed -count=1 -p 1 -json -timeout 40m -run "$pattern" "${paths[@]}") >"$out/$v.json" 2>"$out/$v.stderr" || true
  echo "compat: Kubernetes $v done in $((SECONDS - start)) s" >&2
  args+=("$v=$out/$v.json")
done

status=0
go run ./hack/compattable -tests hack/compat-tests.txt "${args[@]}" | tee "$out/table.md" || status=$?
echo "compat: the table is in $out/table.md, each version's go test -json beside it" >&2
exit "$status"
