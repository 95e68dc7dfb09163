// Package version says which build of driverset is running.
package version

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// stamped and stampedRevision are the release version and its VCS revision, set at build time:
//
//	-ldflags "-X github.com/driverset/driverset/version.stamped=v0.1.0 -X github.com/driverset/driverset/version.stampedRevision=<commit>"
//
// (make build and the Dockerfile do; an image is built without .git, so Go records no revision
// itself). The linker can set only package-level string variables; nothing in the program writes them.
var stamped, stampedRevision string

// Info is one build of driverset.
type Info struct {
	Version   string
	Revision  string
	GoVersion string
}

// Get is this binary's Info.
func Get() Info { return infoOf(stamped, stampedRevision, debug.ReadBuildInfo) }

// infoOf is Info from the linker's stamps and the build info Go records in every binary. Version:
// the stamp when there is one, else the module version of a `go install …@vX`, else "dev".
// Revision: the stamp, else the VCS revision that `go build` records in a clone (suffixed -dirty
// when the tree had changes), else "unknown".
func infoOf(stamped, stampedRevision string, read func() (*debug.BuildInfo, bool)) Info {
	i := Info{Version: stamped, Revision: unknown, GoVersion: unknown}
	bi, ok := read()
	if ok && bi != nil {
		i.GoVersion = bi.GoVersion
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && i.Revision != unknown {
			i.Revision += "-dirty"
		}
	}
	if stampedRevision != "" {
		i.Revision = stampedRevision
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	return i
}

const unknown = "unknown"

// String is what `driverset version` prints.
func (i Info) String() string {
	return fmt.Sprintf("driverset %s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}

// Collector is the driverset_build_info gauge for i: always 1, the build in its labels, so a
// dashboard or alert can tell which versions run (and join them to other series). serve registers
// it on controller-runtime's metrics registry.
func Collector(i Info) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "driverset_build_info",
		Help: "The driverset build that runs: its version, Go version and VCS revision, as labels; the value is always 1.",
	}, []string{"version", "go_version", "revision"})
	g.WithLabelValues(i.Version, i.GoVersion, i.Revision).Set(1)
	return g
}
