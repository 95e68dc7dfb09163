package wrap

import (
	"maps"
	"slices"
	"strings"

	"github.com/driverset/driverset/contract"
)

// The executors' claims a driver makes are labelled as driverset's, so that the gate that holds
// the next incarnation can wait for a lost one's (docs/design.md#executors-claims). Spark labels
// them spark-app-selector=<app id> and with the volume's own label.<key> settings (Spark 4:
// KubernetesVolumeUtils; Spark 3.5 reads no such setting and ignores it); the executors'
// label setting does not reach them. A DStream app's incarnations share the app id its checkpoint
// restores, and the next driver's allocator reuses any claim with that id, a lost incarnation's
// still Terminating too (ExecutorPodsAllocator.getReusablePVCs has no owner or deletion filter):
// the executor made with one would stay Pending.
const (
	executorClaimVolumes = "spark.kubernetes.executor.volumes.persistentVolumeClaim."
	claimLabelKey        = ".label." + contract.LabelDriver
)

// claimLabelsOf is the settings that label, for command (its properties file read with read),
// each executor claim volume the app defines with contract.LabelDriver=<S>, S being what the
// command labels its executors with: "--conf" pairs, in volume name order. A volume counts when
// it has a claim name and a mount path (Spark refuses a volume without a mount path, and a label
// setting alone would make one of a name the app never defined); one the app labels itself is
// left as it is. Spark puts the labels only on the claims it makes (a storage class and a size
// given); a claim that already exists is not changed. None when command is not S-0's (no executor
// label of driverset's).
func claimLabelsOf(command []string, read ReadFile) []string {
	// The setting S-0's command labels its executors with (convert.DriverConf): its value names
	// the StatefulSet, and the claims' label takes it.
	s := sparkSetting(command, contract.SettingExecutorLabelDriver, read)
	if s == "" {
		return nil
	}
	set := sparkSettings(command, executorClaimVolumes, read)
	volumes := map[string]bool{}
	for key := range set {
		name, _, _ := strings.Cut(key, ".")
		volumes[name] = true
	}
	var conf []string
	for _, v := range slices.Sorted(maps.Keys(volumes)) {
		_, labelled := set[v+claimLabelKey]
		if set[v+".options.claimName"] == "" || set[v+".mount.path"] == "" || labelled {
			continue
		}
		conf = append(conf, "--conf", executorClaimVolumes+v+claimLabelKey+"="+s)
	}
	return conf
}

// sparkSettings is every setting of command whose key starts with prefix, keyed by the rest, as
// spark-submit's driver reads them: the properties file's (PropertiesFile, read with read), then
// the "--conf key=value" pairs among spark-submit's options (submitOptions), which win.
func sparkSettings(command []string, prefix string, read ReadFile) map[string]string {
	set := map[string]string{}
	start, end := submitOptions(command)
	if start < 0 {
		return set
	}
	if file := PropertiesFile(command); file != "" {
		if data, err := read(file); err == nil {
			propertiesEach(data, func(k, v string) {
				if rest, ok := strings.CutPrefix(k, prefix); ok {
					set[rest] = v
				}
			})
		}
	}
	for i := start; i+1 < end; i++ {
		if command[i] == "--conf" || command[i] == "-c" {
			k, v, _ := strings.Cut(command[i+1], "=")
			if rest, ok := strings.CutPrefix(k, prefix); ok {
				set[rest] = v
			}
		}
	}
	return set
}
