#!/usr/bin/env bash
# Installs the Debian packages the test bed's real nodes run with: runc (the OCI runtime
# containerd calls), iptables (kube-proxy's rules, inside each node's own network namespace),
# conntrack, iproute2/util-linux for the namespaces, and dbus-daemon (a node's private system bus for
# its graceful shutdown, e2e/testbed/logind.go). Everything else a real node runs is
# built from the Go module proxy by hack/testbed-build.sh. Also jq, which a command of
# docs/usage.md pipes into (e2e/install's TestDocumentedCommandsRun runs it). Needs root; does
# nothing when all are there already.
set -euo pipefail
need=()
for pair in runc:runc iptables:iptables conntrack:conntrack ip:iproute2 nsenter:util-linux unshare:util-linux dbus-daemon:dbus-daemon jq:jq; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
if [[ ${#need[@]} -eq 0 ]]; then
  exit 0
fi
echo "node-packages: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
