#!/usr/bin/env bash
# Builds the helm CLI into a cache folder outside the repo (hack/lib/go-tool.sh), from the helm
# module e2e/go.mod pins (the one harness.RenderChart renders the chart with, so the CLI the docs'
# commands run and the tests' renders are the same Helm), and prints that folder's bin/ path on its
# last line of stdout. `go install helm.sh/helm/v3/cmd/helm@VERSION` builds it with helm's own
# go.mod, as helm's releases are built: nothing is added to e2e/go.mod.
#
# Cold: about 3.5 min on a shared 2-core machine, most of it downloading and compiling helm's
# dependencies (docs/measurements.md); warm: a file test.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/go-tool.sh
source "$here/lib/go-tool.sh"
# The one place the version is decided: e2e/go.mod's requirement.
version=$(cd "$here/../e2e" && GOWORK=off GOFLAGS= go list -m -f '{{.Version}}' helm.sh/helm/v3)

# The version stamped as helm's release Makefile does, so that `helm version` names it.
go_tool_install helm "$version" "helm.sh/helm/v3/cmd/helm@${version}" \
  "-s -w -X helm.sh/helm/v3/internal/version.version=${version}" version --short
