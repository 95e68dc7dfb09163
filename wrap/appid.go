package wrap

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Flags that give each incarnation of the driver an app id of its own.
const (
	FlagSparkAppID  = "spark-app-id"
	FlagIncarnation = "incarnation"
)

// appIDSetting is the Spark setting an incarnation's app id is given in.
const appIDSetting = "spark.app.id="

// maxLabelValue is the longest label value Kubernetes takes: Spark labels every executor with
// its app id (spark-app-selector), so a longer id would make every executor create fail.
const maxLabelValue = 63

// IncarnationAppID is the app id of the incarnation whose pod has UID uid, for the app
// submitted as appID: appID, "-", and the first 8 hexadecimal digits of the UID (lower case).
//
// Spark names its event log after the app id, and Spark 4.x (3.5 with rolling logs) refuses to
// start when that log exists: every incarnation but the first would fail. Spark also labels its
// executors, and selects what its clean stop deletes (its driver Service, claims, executors),
// by app id. An id of its own per incarnation keeps every incarnation's history, and no
// incarnation's stop deletes what the submission made (docs/design.md#one-app-id-per-incarnation).
// 8 digits of a random UID tell an app's incarnations apart (a clash, one in 4 billion per pair,
// costs one failed start, which the next incarnation does not repeat).
func IncarnationAppID(appID, uid string) (string, error) {
	return incarnationAppID(appID, uid, maxLabelValue)
}

// incarnationAppID is IncarnationAppID with the id at most limit characters long (limit at most
// maxLabelValue): appID is cut from its end as far as it must be, the suffix kept whole. Spark's
// ids are spark-<32 random hex digits>, so what remains still tells apps apart.
func incarnationAppID(appID, uid string, limit int) (string, error) {
	hex := strings.ToLower(strings.ReplaceAll(uid, "-", ""))
	if len(hex) < 8 || strings.Trim(hex[:8], "0123456789abcdef") != "" {
		return "", fmt.Errorf("--%s: incarnation %q is not a pod UID", FlagIncarnation, uid)
	}
	id := appID + "-" + hex[:8]
	if len(id) > maxLabelValue {
		return "", fmt.Errorf("--%s: app id %s with its incarnation is longer than %d characters, too long for Spark's executor labels", FlagSparkAppID, appID, maxLabelValue)
	}
	if cut := len(id) - limit; cut > 0 {
		id = strings.TrimRight(appID[:len(appID)-cut], "-") + "-" + hex[:8]
	}
	return id, nil
}

// DriverCommand is the command wrap runs: o.Command, where o.SparkAppID is set, with its
// "--conf spark.app.id=<o.SparkAppID>" given the incarnation's id (IncarnationAppID, cut to
// fit the names of Spark's StatefulSet allocator when the command chooses it: appIDLimit). The
// pair must be there: a driver started with the submitted id would be refused by its own event
// log, or delete the submission's driver Service when it stops. A later argument that only
// looks the same is the job's (it follows the primary resource), so only the first pair is
// changed. o.Command itself is not changed.
//
// Spark's RPC authentication is turned on too, unless the app chose (executorFenceOf): it fences
// the executors of earlier incarnations out of this driver. And the executors' claims are
// labelled as driverset's (claimLabelsOf), so that the next incarnation waits for this one's.
func (o Options) DriverCommand() ([]string, error) {
	command, err := o.incarnationCommand()
	if err != nil {
		return nil, err
	}
	return withSettings(command, slices.Concat(executorFenceOf(command, os.ReadFile).settings(), claimLabelsOf(command, os.ReadFile))), nil
}

// withSettings is command (a copy) with the "--conf" pairs conf right before the first of
// spark-submit's options (submitOptions), so that any setting of the app's own, on the command
// line or in the properties file, is read after them and wins; command itself when conf is empty
// or command has no such option.
func withSettings(command, conf []string) []string {
	start, _ := submitOptions(command)
	if len(conf) == 0 || start < 0 {
		return command
	}
	return slices.Concat(command[:start], conf, command[start:])
}

// incarnationCommand is o.Command with the incarnation's app id (see DriverCommand).
func (o Options) incarnationCommand() ([]string, error) {
	if o.SparkAppID == "" {
		return o.Command, nil
	}
	if o.Incarnation == "" {
		return nil, fmt.Errorf("--%s needs --%s", FlagSparkAppID, FlagIncarnation)
	}
	id, err := o.RunsAs(o.Incarnation, os.ReadFile)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(o.Command); i++ {
		if o.Command[i] == "--conf" && o.Command[i+1] == appIDSetting+o.SparkAppID {
			command := slices.Clone(o.Command)
			command[i+1] = appIDSetting + id
			return command, nil
		}
	}
	return nil, fmt.Errorf("the driver command sets no %s%s (--conf) to give the incarnation's app id %s", appIDSetting, o.SparkAppID, id)
}

// RunsAs is the app id the driver o runs is given in the incarnation whose pod has UID uid:
// IncarnationAppID, cut to fit the names of Spark's StatefulSet allocator when o.Command chooses
// it (appIDLimit; its properties file read with read). The one place that decides it, for wrap
// (DriverCommand, read: os.ReadFile) and for kubectl driverset status (read: the ConfigMap that
// holds the file), so that what status shows is what the driver runs with.
func (o Options) RunsAs(uid string, read ReadFile) (string, error) {
	return incarnationAppID(o.SparkAppID, uid, appIDLimit(o.Command, read))
}

// IncarnationOf reports whether Spark app id id is one that a driver of the app submitted as
// appID may run with: appID itself (an id with no room for a suffix is shared, and a DStream
// restores its first incarnation's from its checkpoint) or an incarnation's id, whole or cut to
// fit Spark's StatefulSet allocator (incarnationAppID). Any UID's suffix is taken: every
// incarnation's, the current one's and earlier ones'.
func IncarnationOf(appID, id string) bool {
	if appID == "" {
		return false
	}
	if id == appID {
		return true
	}
	prefix, suffix, ok := cutSuffix(id)
	if !ok {
		return false
	}
	for _, limit := range []int{maxLabelValue, maxStatefulSetAppID} {
		if want, err := incarnationAppID(appID, suffix, limit); err == nil && want == prefix+"-"+suffix {
			return true
		}
	}
	return false
}

// cutSuffix splits an incarnation's id at its suffix: "-" and 8 lower-case hexadecimal digits.
func cutSuffix(id string) (prefix, suffix string, ok bool) {
	const n = 8
	if len(id) < n+2 || id[len(id)-n-1] != '-' {
		return "", "", false
	}
	suffix = id[len(id)-n:]
	if strings.Trim(suffix, "0123456789abcdef") != "" {
		return "", "", false
	}
	return id[:len(id)-n-1], suffix, true
}
