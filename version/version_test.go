package version

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestInfoOf(t *testing.T) {
	vcs := func(settings ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i+1 < len(settings); i += 2 {
			out = append(out, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return out
	}
	cases := []struct {
		name     string
		stamped  string
		revision string           // stamped too
		info     *debug.BuildInfo // nil: the binary carries no build info
		want     Info
	}{
		{
			name:    "stamped by make build: the stamp wins, the revision comes from VCS",
			stamped: "v0.2.0-3-gabc1234",
			info: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
				Settings: vcs("vcs.revision", "abc1234def", "vcs.modified", "false")},
			want: Info{Version: "v0.2.0-3-gabc1234", Revision: "abc1234def", GoVersion: "go1.26.8"},
		},
		{
			name:     "stamped in an image build (no .git): both stamps",
			stamped:  "v0.2.0",
			revision: "abc1234def",
			info:     &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			want:     Info{Version: "v0.2.0", Revision: "abc1234def", GoVersion: "go1.26.8"},
		},
		{
			name:     "a stamped revision wins over VCS",
			stamped:  "v0.2.0",
			revision: "abc1234def-dirty",
			info: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
				Settings: vcs("vcs.revision", "0000000000", "vcs.modified", "false")},
			want: Info{Version: "v0.2.0", Revision: "abc1234def-dirty", GoVersion: "go1.26.8"},
		},
		{
			name: "plain go build in a clone: dev, with the revision, marked dirty",
			info: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
				Settings: vcs("vcs.revision", "abc1234def", "vcs.modified", "true")},
			want: Info{Version: "dev", Revision: "abc1234def-dirty", GoVersion: "go1.26.8"},
		},
		{
			name: "go install ...@v0.3.0: the module version",
			info: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}},
			want: Info{Version: "v0.3.0", Revision: "unknown", GoVersion: "go1.26.8"},
		},
		{
			name: "no VCS (an image built without .git): dev, revision unknown",
			info: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			want: Info{Version: "dev", Revision: "unknown", GoVersion: "go1.26.8"},
		},
		{
			name:    "no build info at all",
			stamped: "v1.0.0",
			want:    Info{Version: "v1.0.0", Revision: "unknown", GoVersion: "unknown"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := infoOf(tc.stamped, tc.revision, func() (*debug.BuildInfo, bool) { return tc.info, tc.info != nil })
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// This test binary is built by go test: not stamped, so "dev", with the Go it was built by.
func TestGet(t *testing.T) {
	got := Get()
	if got.Version != "dev" || !strings.HasPrefix(got.GoVersion, "go") || got.Revision == "" {
		t.Errorf("Get() = %+v, want version dev, a Go version and some revision", got)
	}
}

func TestString(t *testing.T) {
	got := Info{Version: "v0.2.0", Revision: "abc1234", GoVersion: "go1.26.8"}.String()
	want := "driverset v0.2.0 (revision abc1234, go1.26.8)"
	if got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(Collector(Info{Version: "v0.2.0", Revision: "abc1234", GoVersion: "go1.26.8"})); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP driverset_build_info The driverset build that runs: its version, Go version and VCS revision, as labels; the value is always 1.
# TYPE driverset_build_info gauge
driverset_build_info{go_version="go1.26.8",revision="abc1234",version="v0.2.0"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "driverset_build_info"); err != nil {
		t.Error(err)
	}
}
