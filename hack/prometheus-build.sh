#!/usr/bin/env bash
# Builds promtool from the Go module proxy into a cache folder outside the repo
# (hack/lib/go-tool.sh), keyed by version, and prints that folder's bin/ path on its last line of
# stdout. prometheus/prometheus is never added to driverset's go.mod.
#
# Cold: about 18 CPU-minutes (docs/observability.md has the measured wall time).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/go-tool.sh
source "$here/lib/go-tool.sh"
# shellcheck source=prometheus-versions.env
source "$here/prometheus-versions.env"

# Only promtool: the tests check and unit-test the alert rules with it; no test runs a Prometheus
# server yet, so its build (and its link) is not paid in CI.
go_tool_install prometheus "$PROMETHEUS_MODULE_VERSION" \
  "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_MODULE_VERSION}" "-s -w" --version
