# driverset — see README.md.
SHELL := /usr/bin/env bash
GO    ?= go
# A bare `make` lists the targets; nothing long starts by accident.
.DEFAULT_GOAL := help

# Tests that need the test bed's binaries carry the build tag `testbed`; without it, `go test`
# runs the fast tests alone.
# The test bed's binaries: built once into ~/.cache/driverset-testbed (20-40 min cold), then reused.
TESTBED_BIN = $(shell hack/testbed-build.sh)
TESTBED_DIR ?= /tmp/driverset-testbed

# Three Go modules, each with its own go.mod (CONTRIBUTING.md, "Modules"): the product at the
# root (what the binaries link), the test harness in e2e/ and the release tool in hack/release
# (helm and the like live only there). Each builds and is tested on its own, as a clone without a
# go.work does; GOWORK=off keeps a go.work of your own (for an editor) out of everything make runs.
MODULES := . e2e hack/release
export GOWORK := off
# in-modules CMD runs the shell command CMD in each module's folder, every one even after one
# failed, and fails when one did.
in-modules = status=0; for m in $(MODULES); do echo "== $$m"; (cd $$m && $(1)) || status=1; done; exit $$status

.PHONY: test test-unit prometheus-bin helm-bin e2e compat e2e-real e2e-release e2e-streams e2e-spark-alloc bench-stream chaos spark-artifacts node-packages bench testbed-bin testbed-up testbed-down demo demo-real demo-stream lint build plugin chart-docs release release-check

## test: every test, the test-bed scenarios included (real nodes too: needs root), one package at a time (what CI runs)
test: testbed-bin node-packages spark-artifacts prometheus-bin helm-bin
	@$(call in-modules,DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" DRIVERSET_PROMETHEUS_BIN="$(PROMETHEUS_BIN)" DRIVERSET_HELM_BIN="$(HELM_BIN)" $(GO) test -tags testbed -count=1 -p 1 -timeout 60m ./...)

## test-unit: the fast tests alone (no binaries, seconds)
test-unit:
	@$(call in-modules,$(GO) test -count=1 ./...)

## e2e: only driverset's scenarios on the test bed, verbose; RUN=TestName (a go test -run pattern) runs only those
e2e: testbed-bin
	cd e2e && DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" $(GO) test -tags testbed -count=1 -v -timeout 30m $(if $(RUN),-run '$(RUN)') .

## compat: the KWOK scenarios that cover every Kubernetes API driverset relies on (hack/compat-tests.txt), on the oldest Kubernetes the chart claims and on the test bed's, then a table by version; COMPAT_VERSIONS="v1.X.Y …" for others (each built once, 20-40 min cold); not in make test
compat:
	hack/compat.sh

## e2e-streams: every streaming case on real nodes (each version with the stateless, stateful and PySpark query, killed, cut off, or throwing; DStream apps on 3.5.6, killed, with the event log, resubmitted under another name; a stale executor beside the next incarnation; about 25 min); make test runs two of them
e2e-streams: testbed-bin node-packages spark-artifacts
	cd e2e && DRIVERSET_STREAMS=all DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" $(GO) test -tags testbed -count=1 -v -timeout 40m -run 'TestStreamThroughTheLossOfItsDriversNode|TestStreamDeletedAndResubmittedWhileItsNodeIsCutOff|TestDStreamResubmittedUnderAnotherNameThenItsNodeIsLost|TestStreamExecutorOnTheCutOffNodeOfItsDriver' ./realnode/

## e2e-spark-alloc: Spark's other executor allocations on real nodes (root), a batch job through its driver's node kill: the StatefulSet allocator on each Spark version (the same job without driverset first), OnDemand executor claims on 3.5.6, and on 4.1.1 with one app id kept over incarnations as a DStream's (the lost claims held Terminating, waited for); and a stale executor of a lost incarnation fenced from the next driver by Spark's authentication (each version, with the opt-out as control); about 20 min
e2e-spark-alloc: testbed-bin node-packages spark-artifacts
	cd e2e && DRIVERSET_SPARK_ALLOC=1 DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" $(GO) test -tags testbed -count=1 -v -timeout 40m -run '^TestRealSpark((StatefulSetAllocator|ExecutorClaims)ThroughNodeLoss|StaleExecutorFencedFromTheNextDriver|KeptAppIDWaitsForTheLostExecutorClaims)$$' ./realnode/

## bench-stream: a stream's downtime through the loss of its driver's node, side by side on real nodes (root): with driverset (killed + taint; cut off + self-fence) and without it (never resumes); what each downtime is made of; about 10 min
bench-stream: testbed-bin node-packages spark-artifacts
	cd e2e && DRIVERSET_STREAMS=bench DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" $(GO) test -tags testbed -count=1 -v -timeout 40m -run '^TestStreamDowntimeSideBySide$$' ./realnode/

## e2e-real: only the scenarios on real nodes (kubelet, containerd, runc; real Spark; needs root), verbose; RUN=TestName runs only those
e2e-real: testbed-bin node-packages spark-artifacts
	cd e2e && DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" $(GO) test -tags testbed -count=1 -v -timeout 40m $(if $(RUN),-run '$(RUN)') ./realnode/

## e2e-release: a release installed from its folder alone on a real node (root): the image imported, install.yaml applied, driverset Ready; builds one for the host's platform alone unless DRIVERSET_RELEASE_DIR=dist; and helm uninstall's hook letting go a stranded driver
e2e-release: testbed-bin node-packages helm-bin
	cd e2e && DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" DRIVERSET_HELM_BIN="$(HELM_BIN)" $(GO) test -tags testbed -count=1 -v -timeout 20m ./realrelease/

## chaos: many apps through random faults on the KWOK test bed, every invariant checked; SIZE=short (the default, also in `make e2e`) or long (by hand); SEED=n replays a run
chaos: testbed-bin
	cd e2e && DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" DRIVERSET_CHAOS_SIZE="$(or $(SIZE),short)" $(if $(SEED),DRIVERSET_CHAOS_SEED="$(SEED)") \
	  $(GO) test -tags testbed -count=1 -v -timeout 300m -run '^TestChaos$$' .

## spark-artifacts: fetch (or find) real Spark for the real nodes: Debian's JRE, Spark's jars from Maven Central
spark-artifacts:
	@hack/spark-artifacts.sh >/dev/null

## node-packages: install the Debian packages real nodes need (runc, iptables, conntrack), and jq for the docs' commands, when missing
node-packages:
	@hack/node-packages.sh

# promtool and prometheus for the alert tests: built once into ~/.cache/driverset-testbed, then reused.
PROMETHEUS_BIN = $(shell hack/prometheus-build.sh)

## prometheus-bin: build (or find) promtool and prometheus (alert-rule tests) and print their folder
prometheus-bin:
	@hack/prometheus-build.sh

# The helm CLI the docs' helm commands run with: the version e2e/go.mod pins, built once into
# ~/.cache/driverset-testbed (about 3.5 min cold), then reused.
HELM_BIN = $(shell hack/helm-build.sh)

## helm-bin: build (or find) the helm CLI of the version e2e/go.mod pins and print its folder
helm-bin:
	@hack/helm-build.sh

## testbed-bin: build (or find) the test bed's binaries and print their folder
testbed-bin:
	@hack/testbed-build.sh

# testbed-up backgrounds `go -C e2e run`, not `cd e2e && go run`: a backgrounded list would hold
# make's output open for as long as the bed runs.
## testbed-up: start a test bed in the background; prints the KUBECONFIG to use with kubectl
testbed-up: testbed-bin
	@rm -f $(TESTBED_DIR).out
	@DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" nohup $(GO) -C e2e run ./cmd/testbed up --dir $(abspath $(TESTBED_DIR)) >$(abspath $(TESTBED_DIR)).out 2>&1 &
	@for i in $$(seq 1 180); do grep -q '^export KUBECONFIG' $(TESTBED_DIR).out 2>/dev/null && break; \
	  grep -q '^exit status' $(TESTBED_DIR).out 2>/dev/null && { cat $(TESTBED_DIR).out; exit 1; }; sleep 1; done
	@cat $(TESTBED_DIR).out
	@echo "kubectl: $(TESTBED_BIN)/kubectl"

## testbed-down: stop it
testbed-down:
	cd e2e && $(GO) run ./cmd/testbed down --dir $(abspath $(TESTBED_DIR))

## demo: driverset's main job end to end on a local test bed, told plainly
demo: testbed-bin
	cd e2e && DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" $(GO) run ./cmd/demo

## demo-real: the same with real nodes and real Spark 3.5.6: spark-submit without and with driverset, then the driver's node killed mid-job (root; ~10 min)
demo-real: testbed-bin node-packages spark-artifacts
	cd e2e && DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" DRIVERSET_SPARK_VERSIONS=3.5.6 $(GO) test -tags testbed -count=1 -v -timeout 40m -run '^TestRealSpark$$' ./realnode/

## demo-stream: what driverset exists for, told plainly on real nodes with real Spark 3.5.6: a Structured Streaming query's driver node killed, the stream resumed from its checkpoint on another node, every record exactly once, the downtime (root; 2-3 min once the test bed and Spark are built)
demo-stream: testbed-bin node-packages spark-artifacts
	cd e2e && DRIVERSET_STREAMS=demo DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" DRIVERSET_SPARK_VERSIONS=3.5.6 $(GO) test -tags testbed -count=1 -v -timeout 40m -run '^TestDemoStream$$' ./realnode/

# The version stamped into the binary (`driverset version`, the driverset_build_info metric).
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS   = -X github.com/driverset/driverset/version.stamped=$(VERSION) -X github.com/driverset/driverset/version.stampedRevision=$(REVISION)

# make release: where the image will be pushed, and where the plugin's archives will be
# downloaded from (the krew manifest names them); the image's digest does not depend on either.
IMAGE_REPO  ?= ghcr.io/driverset/driverset
RELEASE_URL ?= https://github.com/driverset/driverset/releases/download/$(VERSION)

## release: VERSION=vX.Y.Z [IMAGE_REPO=…] builds the release into dist/ without Docker: the image (OCI index, linux/amd64+arm64), SBOMs, chart, install.yaml pinned to the image's digest, plugin archives, krew manifest, SHA256SUMS; reproducible (docs/releasing.md)
release:
	@test -z "$(IMAGE)" || { echo "make release builds the image itself now: make release VERSION=vX.Y.Z IMAGE_REPO=REPOSITORY (docs/releasing.md); for an image of your own: DRIVERSET_IMAGE=$(IMAGE) hack/render-install.sh dist/install.yaml"; exit 2; }
	rm -rf dist
	cd hack/release && $(GO) run . -out $(CURDIR)/dist -version '$(VERSION)' -image-repo '$(IMAGE_REPO)' -download-url '$(RELEASE_URL)'

## release-check: hack/release's test for every released platform (make test checks the host's linux platform alone): a release of 8 binaries, 6 cross-compiled, built twice and read back; 79 s warm, about 11 min cold (docs/measurements.md); by hand, before a release and after a change to hack/release, internal/oci or the plugin
release-check:
	cd hack/release && DRIVERSET_RELEASE_PLATFORMS=all $(GO) test -count=1 -v -timeout 60m -run '^TestReleaseIsReproducibleAndComplete$$' .

## build: the driverset binary, stamped with VERSION (default: git describe --tags --always --dirty)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/driverset ./cmd/driverset

## plugin: the kubectl plugin bin/kubectl-driverset (put it on PATH: `kubectl driverset --help`), stamped like build
plugin:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/kubectl-driverset ./cmd/kubectl-driverset

## chart-docs: regenerate the values table of charts/driverset/README.md from values.yaml's comments
chart-docs:
	$(GO) run ./hack/chartdoc

## lint: formatting, and in each module go.mod tidy, vet (without and with the testbed tag), and golangci-lint when installed
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	@$(call in-modules,{ $(GO) mod tidy -diff || { echo "$$m: go.mod/go.sum are not tidy: run go mod tidy in $$m"; exit 1; }; } \
	  && $(GO) vet ./... && $(GO) vet -tags testbed ./... \
	  && if command -v golangci-lint >/dev/null; then golangci-lint run ./...; else echo "golangci-lint not installed; skipped"; fi)

## bench: recovery time on each node-loss path next to a plain StatefulSet (SAMPLES per path, default 3; median, min-max, ratio of medians; 50 drivers on one node), and driverset's memory with and without foreign Spark pods, the webhook's p99 latency at 50 creates/s against none, and 200 apps converted against 200 plain StatefulSets, as ratios
bench: testbed-bin
	cd e2e && DRIVERSET_TESTBED_BIN="$(TESTBED_BIN)" $(if $(SAMPLES),DRIVERSET_BENCH_SAMPLES=$(SAMPLES)) $(GO) test -tags testbed -count=1 -run '^$$' -bench 'Recovery|Memory|AdmissionLatency|Conversion' -benchtime 1x -timeout 60m .

# Mutation testing. `make mutate` samples (hack/mutsample, ours): N mutants per package drawn by
# SEED from the lines each package's tests run. `mutate-changed` and `mutate-all` run gremlins
# from the Go module proxy at a pinned version (not a dependency of the module): hack/mutate.sh.
# N, SEED, SINCE, PKGS and MUTATE_WORKERS are read from the environment or the command line.
N ?= 10
MUTATE_PKGS = $(or $(PKGS),convert webhook controller wrap)
export SINCE PKGS MUTATE_WORKERS

.PHONY: mutate mutate-changed mutate-all
## mutate: mutation sampling of convert, webhook, controller and wrap: N (default 10) random mutants per package from the lines its tests run, SEED= replays a draw; lived mutants and a score per package with its 95% interval; fails when one lived; minutes
mutate:
	@$(GO) run ./hack/mutsample -n $(N) $(if $(SEED),-seed $(SEED)) $(if $(MUTATE_WORKERS),-workers $(MUTATE_WORKERS)) $(MUTATE_PKGS)

## mutate-changed: gremlins over every line of the files changed since SINCE (default main: your branch, or what is not committed) in those packages; exhaustive where you worked; minutes for a file or two
mutate-changed:
	@hack/mutate.sh changed

## mutate-all: gremlins over every line of those packages (PKGS=wrap picks), one package at a time; hours on 2 cores
mutate-all:
	@hack/mutate.sh all

.PHONY: help
## help: this list (the default goal)
help:
	@awk '/^## [a-z0-9-]+: / { sub(/^## /, ""); i = index($$0, ": "); printf "  %-15s %s\n", substr($$0, 1, i - 1), substr($$0, i + 2) }' $(MAKEFILE_LIST)

# The model checker of the controller (controller/model_test.go; docs/testing.md, "The model
# checker"). `go test` runs each scenario to its own depth in about a minute; this runs every
# scenario MODEL_DEPTH events deep ("everything" three less).
MODEL_DEPTH ?= 7

.PHONY: model
## model: the controller's model checker, every scenario MODEL_DEPTH (default 7) events deep: states, depth and the shortest trace to any broken promise; 6 min on 2 shared cores, hours at 8
model:
	DRIVERSET_MODEL_DEPTH=$(MODEL_DEPTH) $(GO) test -count=1 -timeout 0 -v -run '^TestModel$$' ./controller/
