# syntax=docker/dockerfile:1
# driverset's image: one static binary at /driverset. The same image runs `driverset serve` and,
# as the init container of every driver pod, `driverset copy-binary DEST`, which puts the binary
# into any Spark image (glibc or musl alike: it is static).
#
#   docker build -t driverset/driverset:dev .
#   docker buildx build --platform linux/amd64,linux/arm64 -t REPO:TAG --push \
#     --build-arg VERSION=$(git describe --tags --always --dirty) --build-arg REVISION=$(git rev-parse HEAD) .

# `make release` does not use this file: it builds the same image without a container engine
# (hack/release, docs/releasing.md), reproducibly, on a base written there.
#
# Bases by tag, NOT pinned by digest: no registry is reachable where this repository is built
# and tested, so no digest of golang:1.26 or of distroless could be read or checked here, and an
# unchecked digest is worse than none. Pin both where a registry is reachable before building
# from this file (docs/releasing.md#pinning-the-dockerfiles-bases):
#   crane digest golang:1.26            → FROM --platform=$BUILDPLATFORM golang:1.26@sha256:<that> AS build
#   crane digest gcr.io/distroless/static-debian13:nonroot → FROM gcr.io/distroless/static-debian13:nonroot@sha256:<that>
# (both digests are of multi-platform indexes: one pin serves amd64 and arm64.)

# The builder runs on the build machine's platform and cross-compiles (no emulation).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# What `driverset version` and driverset_build_info report (.git is not in the build context).
ARG VERSION=dev
ARG REVISION=
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false \
      -ldflags="-s -w -X github.com/driverset/driverset/version.stamped=${VERSION} -X github.com/driverset/driverset/version.stampedRevision=${REVISION}" \
      -o /out/driverset ./cmd/driverset

# No shell, no package manager; user 65532 (nonroot), which the manifests' runAsUser also name.
FROM gcr.io/distroless/static-debian13:nonroot
COPY --from=build /out/driverset /driverset
USER 65532:65532
ENTRYPOINT ["/driverset"]
