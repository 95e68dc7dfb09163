package wrap

import (
	"bufio"
	"bytes"
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

// ReadFile reads a file the driver's command names (its --properties-file): os.ReadFile where wrap
// runs, in the driver's container; the key of the ConfigMap mounted there in kubectl driverset.
type ReadFile func(path string) ([]byte, error)

// appIDLimit is how long the app id of the driver that command runs may be: maxStatefulSetAppID
// when it uses Spark's StatefulSet allocator, else a label value's 63 characters.
func appIDLimit(command []string, read ReadFile) int {
	if sparkSetting(command, allocatorSetting, read) == "statefulset" {
		return maxStatefulSetAppID
	}
	return maxLabelValue
}

// sparkSetting is the value command gives Spark's setting key, as spark-submit's driver reads
// it: the last "--conf key=value" among spark-submit's options (submitOptions), else the
// properties file they name with --properties-file (PropertiesFile; in cluster mode spark-submit
// puts every setting there), read with read, else "". A file that cannot be read gives nothing:
// Spark refuses to start without it anyway.
func sparkSetting(command []string, key string, read ReadFile) string {
	start, end := submitOptions(command)
	if start < 0 {
		return ""
	}
	for i := start; i+1 < end; i++ {
		if command[i] == "--conf" || command[i] == "-c" {
			if v, ok := strings.CutPrefix(command[i+1], key+"="); ok {
				return lastConf(command[i+2:end], key, v)
			}
		}
	}
	file := PropertiesFile(command)
	if file == "" {
		return ""
	}
	data, err := read(file)
	if err != nil {
		return ""
	}
	return propertiesValue(data, key)
}

// PropertiesFile is the properties file a driver command names (the last --properties-file among
// spark-submit's options: submitOptions), "" when it names none.
func PropertiesFile(command []string) string {
	start, end := submitOptions(command)
	if start < 0 {
		return ""
	}
	file := ""
	for i := start; i+1 < end; i++ {
		if command[i] == "--properties-file" {
			file = command[i+1]
		}
	}
	return file
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

// propertiesValue reads key from a Java properties file's data as spark-submit writes it
// (propertiesEach), "" when the file does not set it; the last line that sets it wins.
func propertiesValue(data []byte, key string) string {
	value := ""
	propertiesEach(data, func(k, v string) {
		if k == key {
			value = v
		}
	})
	return value
}

// propertiesEach calls each with every key and value a Java properties file's data sets, in
// order, as spark-submit writes it (one key=value a line; '#' and '!' start comments; ':' or white
// space may separate too). Escapes and continued lines are not read: the settings looked for here
// have plain keys and values.
func propertiesEach(data []byte, each func(key, value string)) {
	scan := bufio.NewScanner(bytes.NewReader(data))
	scan.Buffer(make([]byte, 64<<10), 1<<20)
	for scan.Scan() {
		line := strings.TrimLeft(scan.Text(), " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		end := strings.IndexAny(line, "=: \t\f")
		if end < 0 {
			continue
		}
		rest := strings.TrimLeft(line[end:], " \t\f")
		if rest != "" && (rest[0] == '=' || rest[0] == ':') {
			rest = rest[1:]
		}
		each(line[:end], strings.TrimSpace(rest))
	}
}
