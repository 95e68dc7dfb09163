// Package images builds the container images of the test bed's real nodes as OCI image archives,
// for `ctr -n k8s.io images import`: no registry is reachable from the test machine and there is
// no Docker engine, so every image is written here, one uncompressed layer each, from statically
// linked Go binaries (GoBinary) and a few files.
//
// The images (names in the *Name constants; pods must not pull them: imagePullPolicy Never or
// IfNotPresent):
//
//   - Pause: the pod sandbox, the program in ./pause.
//   - Driverset: the same content as the repository's Dockerfile image, which is
//     gcr.io/distroless/static-debian13:nonroot plus /driverset. distroless cannot be pulled here,
//     so the parts of it that a static binary uses are written instead: /etc/passwd and /etc/group
//     with root, nobody and nonroot (65532), /home/nonroot, /tmp (1777), PATH; user 65532:65532
//     and entrypoint /driverset as in the Dockerfile. Not included: CA certificates, tzdata,
//     /etc/os-release (driverset talks only to the apiserver, with the ServiceAccount's CA).
//   - SimSpark: a stand-in for a Spark image, running e2e/cmd/simspark as /opt/entrypoint.sh.
//   - CoreDNS: /coredns on the same distroless-like base.
//
// The writer (internal/oci, shared with hack/release) is deliberately small and deterministic:
// the same Image gives the same bytes, so the same digest, and containerd sees an unchanged image
// as unchanged.
package images
