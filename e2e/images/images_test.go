package images

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/driverset/driverset/internal/oci/ocitest"
)

// TestImages reads each image back from its archive: what a container of it would see.
func TestImages(t *testing.T) {
	bin := []byte("\x7fELF-not-really")
	type entry struct {
		mode     os.FileMode
		uid, gid int
		data     string // checked when not ""
		contains string // a line the file must hold, when not ""
	}
	for _, tc := range []struct {
		img        Image
		name       string
		entrypoint []string
		user       string
		workdir    string
		files      map[string]entry
	}{
		{
			img: Pause(bin), name: PauseName, entrypoint: []string{"/pause"},
			files: map[string]entry{"pause": {mode: 0o755, data: string(bin)}},
		},
		{
			img: Driverset(bin), name: DriversetName, entrypoint: []string{"/driverset"}, user: "65532:65532",
			files: map[string]entry{
				"driverset":     {mode: 0o755, data: string(bin)},
				"etc/passwd":    {mode: 0o644, contains: "nonroot:x:65532:65532:"},
				"etc/group":     {mode: 0o644, contains: "nonroot:x:65532:"},
				"tmp/":          {mode: os.ModeDir | os.ModeSticky | 0o777},
				"home/nonroot/": {mode: os.ModeDir | 0o700, uid: 65532, gid: 65532},
			},
		},
		{
			img: SimSpark(bin), name: SimSparkName, entrypoint: []string{"/opt/entrypoint.sh"}, user: "185", workdir: "/opt",
			files: map[string]entry{
				"opt/entrypoint.sh": {mode: 0o755, data: string(bin)},
				"opt/simspark":      {mode: 0o755, data: string(bin)},
				"etc/passwd":        {mode: 0o644, contains: "spark:x:185:185:"},
				"tmp/":              {mode: os.ModeDir | os.ModeSticky | 0o777},
			},
		},
		{
			img: CoreDNS(bin), name: CoreDNSName, entrypoint: []string{"/coredns"}, user: "65532:65532",
			files: map[string]entry{
				"coredns":    {mode: 0o755, data: string(bin)},
				"etc/passwd": {mode: 0o644, contains: "nonroot:x:65532:65532:"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if _, err := WriteOCIArchive(&buf, tc.img); err != nil {
				t.Fatal(err)
			}
			a := ocitest.ReadArchive(t, buf.Bytes())
			if got := a.Index.Manifests[0].Annotations["io.containerd.image.name"]; got != tc.name {
				t.Errorf("name %q", got)
			}
			c := a.Config.Config
			if !reflect.DeepEqual(c.Entrypoint, tc.entrypoint) || c.User != tc.user || c.WorkingDir != tc.workdir || len(c.Cmd) != 0 {
				t.Errorf("config %+v", c)
			}
			got := map[string]ocitest.LayerEntry{}
			for _, e := range a.Layer {
				got[e.Name] = e
			}
			for name, want := range tc.files {
				e, ok := got[name]
				switch {
				case !ok:
					t.Errorf("%s missing", name)
				case e.Mode != want.mode || e.UID != want.uid || e.GID != want.gid:
					t.Errorf("%s: %v %d:%d, want %v %d:%d", name, e.Mode, e.UID, e.GID, want.mode, want.uid, want.gid)
				case want.data != "" && e.Data != want.data:
					t.Errorf("%s: content %q", name, e.Data)
				case want.contains != "" && !hasLinePrefix(e.Data, want.contains):
					t.Errorf("%s has no line starting %q:\n%s", name, want.contains, e.Data)
				}
			}
			if e := got["etc/passwd"]; e.Name != "" && !hasLinePrefix(e.Data, "root:x:0:0:") {
				t.Errorf("etc/passwd has no root:\n%s", e.Data)
			}
		})
	}
}

func hasLinePrefix(text, prefix string) bool {
	for l := range strings.Lines(text) {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
