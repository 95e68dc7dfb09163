package images

import (
	"os"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/internal/oci"
)

// The images' names. The registry part is a name only: nothing is ever pulled from it.
const (
	PauseName     = "driverset.test/pause:e2e"
	DriversetName = "driverset.test/driverset:e2e"
	SimSparkName  = "driverset.test/simspark:e2e"
	CoreDNSName   = "driverset.test/coredns:e2e"
)

// Users of the images.
const (
	NonRootUID = oci.NonRootUID // distroless's nonroot, the Dockerfile's USER
	SparkUID   = 185            // the spark user of Spark's images
)

// defaultPath is the PATH distroless and Docker set.
const defaultPath = oci.DefaultPath

// SimSparkBinaryPath is where SimSpark also installs the simulator under its own name.
const SimSparkBinaryPath = "/opt/simspark"

func tmpDir() File { return File{Path: "/tmp", Mode: os.ModeDir | os.ModeSticky | 0o777} }

// distroless is the part of gcr.io/distroless/static-debian13:nonroot that a static binary sees
// (oci.NonRootBase, also the released image's base).
func distroless() []File { return oci.NonRootBase() }

// Pause is the pod sandbox image: bin is the program in ./pause, run as /pause.
func Pause(bin []byte) Image {
	return Image{
		Name:       PauseName,
		Files:      []File{{Path: "/pause", Mode: 0o755, Data: bin}},
		Entrypoint: []string{"/pause"},
	}
}

// Driverset is the Dockerfile's image: bin (cmd/driverset) at /driverset on the distroless base,
// as the release builds it (oci.Driverset).
func Driverset(bin []byte) Image {
	img := oci.Driverset(bin)
	img.Name = DriversetName
	return img
}

// SimSpark stands in for a Spark image: bin (e2e/cmd/simspark) is the entrypoint at the path
// driverset assumes for Spark images (contract.DefaultEntrypoint), and also at SimSparkBinaryPath;
// the user is spark (185).
func SimSpark(bin []byte) Image {
	return Image{
		Name: SimSparkName,
		Files: []File{
			{Path: contract.DefaultEntrypoint, Mode: 0o755, Data: bin},
			{Path: SimSparkBinaryPath, Mode: 0o755, Data: bin},
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\n" +
				"spark:x:185:185:spark:/opt:/sbin/nologin\n")},
			{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nspark:x:185:\n")},
			tmpDir(),
		},
		Entrypoint: []string{contract.DefaultEntrypoint},
		Env:        []string{defaultPath},
		User:       "185",
		WorkingDir: "/opt",
	}
}

// CoreDNS is bin (CoreDNS's coredns command) at /coredns on the distroless base, as CoreDNS's own
// image is; its Corefile comes from the pod's args and volumes.
func CoreDNS(bin []byte) Image {
	return Image{
		Name:       CoreDNSName,
		Files:      append(distroless(), File{Path: "/coredns", Mode: 0o755, Data: bin}),
		Entrypoint: []string{"/coredns"},
		Env:        []string{defaultPath},
		User:       "65532:65532",
	}
}
