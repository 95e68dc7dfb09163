package sparksim

import (
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ids draws Spark's random identifiers from one reader and one clock, so that a seeded reader
// and a fixed clock give the same names on every run.
type ids struct {
	rand io.Reader
	now  func() time.Time
}

func (g ids) bytes(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(g.rand, b); err != nil {
		return nil, fmt.Errorf("sparksim: reading randomness: %w", err)
	}
	return b, nil
}

// appID is KubernetesConf.getKubernetesAppId: "spark-" + a random UUID without dashes.
func (g ids) appID() (string, error) {
	b, err := g.bytes(16)
	if err != nil {
		return "", err
	}
	return "spark-" + hex.EncodeToString(uuidV4(b)), nil
}

// uuid is a random (version 4) UUID in its dashed form, as java.util.UUID prints it.
func (g ids) uuid() (string, error) {
	b, err := g.bytes(16)
	if err != nil {
		return "", err
	}
	h := hex.EncodeToString(uuidV4(b))
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

func uuidV4(b []byte) []byte {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return b
}

// uniqueID is KubernetesUtils.uniqueID (3.x+): 3 random bytes in hex followed by the low 40 bits
// of the clock in milliseconds, in hex without padding (Long.toHexString) — 16 characters today.
func (g ids) uniqueID() (string, error) {
	b, err := g.bytes(3)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(b) + strconv.FormatInt(g.now().UnixMilli()&0xFFFFFFFFFF, 16), nil
}

var (
	notNameChar  = regexp.MustCompile(`[^a-z0-9-]`)
	dashes       = regexp.MustCompile(`-+`)
	whitespace   = regexp.MustCompile(`\s+`)
	leadingDigit = regexp.MustCompile(`^[0-9]`)
)

// resourcePrefix is the resource name prefix spark-submit derives from the app name.
// 2.4/3.0 (KubernetesClientApplication.getResourceNamePrefix): "<name>-<launch millis>", lower-cased,
// whitespace and dots to dashes, other invalid characters dropped. 3.x+
// (KubernetesConf.getResourceNamePrefix): "<name>-<uniqueID>", invalid characters to dashes,
// no leading dash, a leading digit replaced by "x".
func (g ids) resourcePrefix(v Version, appName string) (string, error) {
	if v == Spark24 {
		s := strings.ToLower(strings.TrimSpace(fmt.Sprintf("%s-%d", appName, g.now().UnixMilli())))
		s = whitespace.ReplaceAllString(s, "-")
		s = strings.ReplaceAll(s, ".", "-")
		s = notNameChar.ReplaceAllString(s, "")
		return dashes.ReplaceAllString(s, "-"), nil
	}
	id, err := g.uniqueID()
	if err != nil {
		return "", err
	}
	s := strings.ToLower(strings.TrimSpace(appName + "-" + id))
	s = notNameChar.ReplaceAllString(s, "-")
	s = dashes.ReplaceAllString(s, "-")
	s = strings.TrimPrefix(s, "-")
	return leadingDigit.ReplaceAllString(s, "x"), nil
}

// appNameLabel is KubernetesConf.getAppNameLabel: the app name made a valid label value and cut
// to 63 characters.
func appNameLabel(appName string) string {
	s := strings.ToLower(strings.TrimSpace(appName))
	s = notNameChar.ReplaceAllString(s, "-")
	s = dashes.ReplaceAllString(s, "-")
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

// memoryMiB parses a Spark memory setting in MiB units (bytesConf(ByteUnit.MiB)): a bare number
// is MiB; k, m, g, t, p (optionally followed by "b") scale it.
func memoryMiB(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "b")
	unit := int64(1 << 20)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k':
			unit, t = 1<<10, t[:n-1]
		case 'm':
			unit, t = 1<<20, t[:n-1]
		case 'g':
			unit, t = 1<<30, t[:n-1]
		case 't':
			unit, t = 1<<40, t[:n-1]
		case 'p':
			unit, t = 1<<50, t[:n-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("sparksim: invalid memory size %q", s)
	}
	return n * unit / (1 << 20), nil
}

// overheadMiB is Spark's memory overhead rule: an explicit overhead wins; otherwise
// max(int(factor × memory), floor), the floor being 384 MiB, configurable from 4.0 on.
func overheadMiB(conf map[string]string, role string, memMiB int64, t traits) (int64, error) {
	if v, ok := conf["spark."+role+".memoryOverhead"]; ok {
		return memoryMiB(v)
	}
	factor := 0.1
	key := "spark.kubernetes.memoryOverheadFactor"
	if !t.oldConfMap {
		if _, ok := conf["spark."+role+".memoryOverheadFactor"]; ok {
			key = "spark." + role + ".memoryOverheadFactor"
		}
	}
	if v, ok := conf[key]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("sparksim: invalid %s %q", key, v)
		}
		factor = f
	}
	floor := int64(384)
	if t.minOverheadConf {
		if v, ok := conf["spark."+role+".minMemoryOverhead"]; ok {
			f, err := memoryMiB(v)
			if err != nil {
				return 0, err
			}
			floor = f
		}
	}
	return max(int64(factor*float64(memMiB)), floor), nil
}
