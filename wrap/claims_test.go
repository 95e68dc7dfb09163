package wrap

import (
	"slices"
	"testing"
)

// A DStream app's incarnations share the app id restored from its checkpoint, and Spark's
// allocator reuses any claim labelled with its id (getReusablePVCs: no owner or deletion
// filter), a lost incarnation's still Terminating too. The gate waits for those claims, found by
// driverset's label, which only the driver can put on the claims it makes: wrap gives each
// executor claim volume the app defines (a claim name and a mount path, the two Spark requires
// of one) the label the executors carry, contract.LabelDriver=<S>, read from S-0's own setting.
// Spark 4 reads such settings (KubernetesVolumeUtils, label.<key>); Spark 3.5 ignores them.
func TestDriverCommandLabelsTheExecutorsClaimsAsDriversets(t *testing.T) {
	dir := t.TempDir()
	const (
		entry = "/opt/entrypoint.sh"
		vols  = "spark.kubernetes.executor.volumes.persistentVolumeClaim."
		ours  = "spark.kubernetes.executor.label.driverset.dev/driver=pi-driver"
	)
	onDemand := writeFile(t, dir, "ondemand.properties", vols+"data.options.claimName=OnDemand\n"+
		vols+"data.options.storageClass=standard\n"+vols+"data.options.sizeLimit=1Gi\n"+vols+"data.mount.path=/data\n"+
		vols+"cache.mount.path=/cache\n"+vols+"cache.options.claimName=OnDemand\n")
	noPath := writeFile(t, dir, "nopath.properties", vols+"data.options.claimName=OnDemand\n")
	labelled := writeFile(t, dir, "labelled.properties", vols+"data.options.claimName=OnDemand\n"+vols+"data.mount.path=/data\n"+
		vols+"data.label.driverset.dev/driver=other\n")
	driverOnly := writeFile(t, dir, "driver.properties", "spark.kubernetes.driver.volumes.persistentVolumeClaim.data.options.claimName=OnDemand\n"+
		"spark.kubernetes.driver.volumes.persistentVolumeClaim.data.mount.path=/data\n")
	command := func(props string, more ...string) []string {
		c := []string{entry, "driver", "--conf", ours, "--conf", "spark.authenticate=true"}
		c = append(c, more...)
		if props != "" {
			c = append(c, "--properties-file", props)
		}
		// A job argument that looks like a volume: the job's, never read.
		return append(c, "--class", "Pi", "spark-internal", "--conf", vols+"job.options.claimName=OnDemand")
	}
	label := func(volume string) []string {
		return []string{"--conf", vols + volume + ".label.driverset.dev/driver=pi-driver"}
	}
	// added is c with the labels right after the entry command, before every setting of the app's.
	added := func(c []string, volumes ...string) []string {
		out := slices.Clone(c[:2])
		for _, v := range volumes {
			out = append(out, label(v)...)
		}
		return append(out, c[2:]...)
	}
	cases := []struct {
		name    string
		command []string
		want    []string
	}{
		{"OnDemand claims in the properties file: each labelled, in name order", command(onDemand), added(command(onDemand), "cache", "data")},
		{"a claim volume on the command line: labelled",
			command("", "--conf", vols+"scratch.options.claimName=OnDemand", "--conf", vols+"scratch.mount.path=/s"),
			added(command("", "--conf", vols+"scratch.options.claimName=OnDemand", "--conf", vols+"scratch.mount.path=/s"), "scratch")},
		{"its mount path on the command line, its claim in the file: labelled",
			command(noPath, "--conf", vols+"data.mount.path=/data"), added(command(noPath, "--conf", vols+"data.mount.path=/data"), "data")},
		{"no mount path: Spark would refuse the volume, a label would not help; as it is", command(noPath), command(noPath)},
		{"the app labels the claims itself: as it is", command(labelled), command(labelled)},
		{"the driver's own claims: spark-submit makes them, as it is", command(driverOnly), command(driverOnly)},
		{"no claim volume: as it is", command(""), command("")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkDriverCommand(t, Options{Command: slices.Clone(tc.command)}, tc.want)
		})
	}

	t.Run("not driverset's S-0 (no executor label of its own): as it is", func(t *testing.T) {
		c := []string{entry, "driver", "--conf", "spark.authenticate=true", "--properties-file", onDemand, "--class", "Pi", "spark-internal"}
		checkDriverCommand(t, Options{Command: slices.Clone(c)}, c)
	})
}
