package wrap

import (
	"bufio"
	"os"
	"slices"
	"strings"
)

// Spark's StatefulSet executor allocator (spark.kubernetes.allocation.pods.allocator=statefulset)
// makes one StatefulSet of executors per app id and resource profile, named
// spark-s-<app id>-<profile id> (StatefulSetPodsAllocator.setName, 3.5 and 4.1). The StatefulSet
// controller labels each pod it makes controller-revision-hash=<set name>-<hash of up to 10
// characters>, and a label value has at most 63: a set name longer than 52 characters gets no
// pod at all (the apiserver refuses each create). Spark's own id, spark-<32 hex>, leaves room
// for it; with an incarnation's suffix it does not.
const (
	allocatorSetting = "spark.kubernetes.allocation.pods.allocator"
	// maxStatefulSetAppID is the longest app id whose executor StatefulSets' pods can be made:
	// 63, less "-" and the 10 characters of the revision hash, less "spark-s-", "-" and a
	// resource profile id of two digits.
	maxStatefulSetAppID = maxLabelValue - 11 - len("spark-s-") - 3
)

// appIDLimit is how long the app id of the driver that command runs may be: maxStatefulSetAppID
// when it uses Spark's StatefulSet allocator, else a label value's 63 characters.
func appIDLimit(command []string) int {
	if sparkSetting(command, allocatorSetting) == "statefulset" {
		return maxStatefulSetAppID
	}
	return maxLabelValue
}

// sparkSetting is the value command gives Spark's setting key, as spark-submit's driver reads
// it: the last "--conf key=value" among spark-submit's options (submitOptions), else the
// properties file they name with --properties-file (in cluster mode spark-submit puts every
// setting there), else "". A file that cannot be read gives nothing: Spark refuses to start
// without it anyway.
func sparkSetting(command []string, key string) string {
	start, end := submitOptions(command)
	if start < 0 {
		return ""
	}
	value, file := "", ""
	for i := start; i+1 < end; i++ {
		switch command[i] {
		case "--conf", "-c":
			if v, ok := strings.CutPrefix(command[i+1], key+"="); ok {
				return lastConf(command[i+2:end], key, v)
			}
		case "--properties-file":
			file = command[i+1]
		}
	}
	if file != "" {
		value = propertiesValue(file, key)
	}
	return value
}

// submitFlags are spark-submit's options that take no value.
var submitFlags = []string{"--verbose", "-v", "--supervise"} //nolint:gochecknoglobals // constant list

// submitOptions is where spark-submit's options are in a driver command: from its first --conf or
// --properties-file (what comes before is the entry command) up to the primary resource, the
// first argument that is neither an option nor an option's value; what follows it is the job's
// own arguments, which may look like settings. start is -1 when the command has no such option.
func submitOptions(command []string) (start, end int) {
	start = slices.IndexFunc(command, func(a string) bool { return a == "--conf" || a == "-c" || a == "--properties-file" })
	if start < 0 {
		return -1, -1
	}
	for i := start; i < len(command); i++ {
		switch {
		case slices.Contains(submitFlags, command[i]):
		case strings.HasPrefix(command[i], "-"):
			i++ // its value
		default:
			return start, i
		}
	}
	return start, len(command)
}

// lastConf is the last value "--conf key=value" gives in rest, v when none does.
func lastConf(rest []string, key, v string) string {
	for i := 0; i+1 < len(rest); i++ {
		if rest[i] == "--conf" || rest[i] == "-c" {
			if w, ok := strings.CutPrefix(rest[i+1], key+"="); ok {
				v = w
			}
		}
	}
	return v
}

// propertiesValue reads key from a Java properties file as spark-submit writes it (one
// key=value a line; '#' and '!' start comments; ':' or white space may separate too). Escapes
// and continued lines are not read: the settings looked for here have plain keys and values.
func propertiesValue(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	value := ""
	scan := bufio.NewScanner(f)
	scan.Buffer(make([]byte, 64<<10), 1<<20)
	for scan.Scan() {
		line := strings.TrimLeft(scan.Text(), " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		end := strings.IndexAny(line, "=: \t\f")
		if end < 0 || line[:end] != key {
			continue
		}
		rest := strings.TrimLeft(line[end:], " \t\f")
		if rest != "" && (rest[0] == '=' || rest[0] == ':') {
			rest = rest[1:]
		}
		value = strings.TrimSpace(rest)
	}
	return value
}
