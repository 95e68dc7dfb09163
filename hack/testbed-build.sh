#!/usr/bin/env bash
# Builds the test bed's binaries from the Go module proxy into a cache folder outside the repo,
# keyed by version, and prints that folder's bin/ path on its last line of stdout.
#
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl  (k8s.io/kubernetes)
#   etcd                                                              (go.etcd.io/etcd/server/v3)
#   kwok                                                              (sigs.k8s.io/kwok)
#   kubelet, kube-proxy (real nodes)                                  (k8s.io/kubernetes)
#   containerd, containerd-shim-runc-v2, ctr                          (github.com/containerd/containerd/v2)
#   cni/bridge, cni/host-local                                        (github.com/containernetworking/plugins)
#   coredns, with only the plugins cluster DNS needs                  (github.com/coredns/coredns)
#
# runc, iptables and conntrack are Debian packages (hack/node-packages.sh installs them).
#
# A folder that is complete (its .done stamp exists) is reused as is. A cold build takes
# 20-40 minutes on 2 cores; progress goes to stderr every 30 s.
#
# Environment: DRIVERSET_TESTBED_CACHE (default ~/.cache/driverset-testbed);
# DRIVERSET_TESTBED_KUBERNETES=v1.X.Y builds that Kubernetes instead of the pinned one;
# DRIVERSET_TESTBED_KWOK_ONLY=1 builds what a bed of KWOK nodes needs alone (the control plane,
# kubectl, etcd, kwok: no kubelet, kube-proxy, containerd, CNI or CoreDNS) into a folder of its own.
# make compat uses both, for the oldest Kubernetes the chart claims.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=testbed-versions.env
source "$here/testbed-versions.env"

cache=${DRIVERSET_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/driverset-testbed}
kwok_only=${DRIVERSET_TESTBED_KWOK_ONLY:-}
if [[ -n "$kwok_only" ]]; then
  key="${KWOK_TESTBED_KEY}_$(go env GOOS)-$(go env GOARCH)"
else
  key="${TESTBED_KEY}_$(go env GOOS)-$(go env GOARCH)"
fi
out="$cache/$key"
bin="$out/bin"

log() { printf '[testbed-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ -f "$out/.done" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$bin" "$out/src"
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

# progress NAME PID LOGFILE: prints, every 30 s, how many packages the build has compiled so far.
progress() {
  local name=$1 pid=$2 logf=$3 start=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30
    kill -0 "$pid" 2>/dev/null || break
    log "$name: $(grep -c . "$logf" 2>/dev/null || echo 0) packages compiled, $((SECONDS - start)) s"
  done
}

# build NAME DIR CMD...: runs CMD in DIR with -v to a log, reporting progress.
build() {
  local name=$1 dir=$2
  shift 2
  local logf="$out/$name.log"
  log "$name: building (log: $logf)"
  (cd "$dir" && "$@" >"$logf" 2>&1) &
  local pid=$!
  progress "$name" "$pid" "$logf" &
  local ppid=$!
  if ! wait "$pid"; then
    kill "$ppid" 2>/dev/null || true
    tail -n 40 "$logf" >&2
    log "$name: FAILED"
    exit 1
  fi
  kill "$ppid" 2>/dev/null || true
  log "$name: done"
}

export GOFLAGS=-mod=mod
export CGO_ENABLED=0

# --- Kubernetes: a wrapper module, since `go install` refuses a module with replace directives.
k8s="$out/src/kubernetes"
k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
[[ -n "$kwok_only" ]] || k8s_cmds+=(kubelet kube-proxy)
k8s_missing=
for c in "${k8s_cmds[@]}"; do [[ -x "$bin/$c" ]] || k8s_missing=1; done
if [[ -n "$k8s_missing" ]]; then
  mkdir -p "$k8s"
  modfile=$(go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  staging_version="v0${KUBERNETES_VERSION#v1}" # v1.37.2 -> v0.37.2
  {
    echo "module driverset.dev/testbed/kubernetes"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')"
    echo
    echo "require k8s.io/kubernetes ${KUBERNETES_VERSION}"
    echo
    echo "replace ("
    # Every staging module kubernetes replaces with ./staging/..., but the two samples that the
    # proxy does not serve and no binary of ours needs.
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$modfile" |
      grep -v -e '^k8s.io/sample-cli-plugin$' -e '^k8s.io/sample-controller$' |
      while read -r m; do echo "	$m => $m ${staging_version}"; done
    echo ")"
  } >"$k8s/go.mod"
  minor=${KUBERNETES_VERSION#v1.}
  minor=${minor%%.*}
  ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=${KUBERNETES_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor} -X $p.gitTreeState=clean"
  done
  build kubernetes "$k8s" go build -v -trimpath -ldflags "$ldflags" -o "$bin/" "${k8s_cmds[@]/#/k8s.io/kubernetes/cmd/}"
fi

# --- etcd: the server module's etcdmain behind a five-line main.
etcd="$out/src/etcd"
if [[ ! -x "$bin/etcd" ]]; then
  mkdir -p "$etcd"
  cat >"$etcd/main.go" <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  printf 'module driverset.dev/testbed/etcd\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$etcd/go.mod"
  build etcd "$etcd" go build -v -trimpath -ldflags "-s -w" -o "$bin/etcd" .
fi

# --- kwok: a plain module.
if [[ ! -x "$bin/kwok" ]]; then
  build kwok "$out" env GOFLAGS= GOBIN="$bin" go install -v -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
fi

if [[ -n "$kwok_only" ]]; then
  "$bin/kube-apiserver" --version >&2
  touch "$out/.done"
  log "ready (KWOK nodes only): $bin"
  echo "$bin"
  exit 0
fi

# --- containerd: the daemon, its runc shim and ctr (to import images), without the storage
# drivers that need cgo or kernel modules.
if [[ ! -x "$bin/containerd" || ! -x "$bin/containerd-shim-runc-v2" || ! -x "$bin/ctr" ]]; then
  build containerd "$out" env GOFLAGS= GOBIN="$bin" go install -v -trimpath -ldflags "-s -w" \
    -tags "no_btrfs,no_devmapper,no_zfs,osusergo,netgo" \
    "github.com/containerd/containerd/v2/cmd/containerd@${CONTAINERD_VERSION}" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@${CONTAINERD_VERSION}" \
    "github.com/containerd/containerd/v2/cmd/ctr@${CONTAINERD_VERSION}"
fi

# --- CNI plugins: a bridge per node with host-local addresses (containerd sets up loopback itself).
if [[ ! -x "$bin/cni/bridge" || ! -x "$bin/cni/host-local" ]]; then
  mkdir -p "$bin/cni"
  build cni "$out" env GOFLAGS= GOBIN="$bin/cni" go install -v -trimpath -ldflags "-s -w" \
    "github.com/containernetworking/plugins/plugins/main/bridge@${CNI_PLUGINS_VERSION}" \
    "github.com/containernetworking/plugins/plugins/ipam/host-local@${CNI_PLUGINS_VERSION}"
fi

# --- CoreDNS with only the plugins cluster DNS needs: its full set pulls in every cloud SDK.
coredns="$out/src/coredns"
if [[ ! -x "$bin/coredns" ]]; then
  mkdir -p "$coredns"
  cat >"$coredns/main.go" <<'EOF'
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
)

func main() {
	// The order in which these plugins see a query (CoreDNS's plugin.cfg, cut down).
	dnsserver.Directives = []string{"bind", "errors", "log", "cache", "kubernetes"}
	coremain.Run()
}
EOF
  printf 'module driverset.dev/testbed/coredns\n\ngo 1.26\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" >"$coredns/go.mod"
  build coredns "$coredns" sh -c 'go mod tidy && go build -v -trimpath -ldflags "-s -w" -o "$0/coredns" .' "$bin"
fi

"$bin/kube-apiserver" --version >&2
"$bin/etcd" --version | head -1 >&2
touch "$out/.done"
log "ready: $bin"
echo "$bin"
