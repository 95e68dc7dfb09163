// Package install holds the tests of how a cluster admin installs driverset: the kustomize base
// and overlays, the rendered install.yaml, the Helm chart, and the RBAC they grant. The tests
// that need a cluster run on the real test bed (e2e/testbed); every test needs its kubectl
// ($DRIVERSET_TESTBED_BIN).
package install
