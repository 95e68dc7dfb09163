package webhook

import (
	"testing"

	jsonpatch4 "gopkg.in/evanphx/json-patch.v4"
)

// TestFieldPatch is the short path's diff: one op per top-level field that differs, carrying the
// field whole, and nothing for fields that are the same; applied as the apiserver applies a
// webhook's patch, it turns before into after.
func TestFieldPatch(t *testing.T) {
	for _, tc := range []struct {
		name, before, after string
		want                []string
	}{
		{name: "the same", before: `{"metadata":{"name":"p"},"spec":{}}`, after: `{"metadata":{"name":"p"},"spec":{}}`},
		{name: "one field changed deep inside", before: `{"metadata":{"name":"p"},"spec":{"a":{"b":1}}}`,
			after: `{"metadata":{"name":"p"},"spec":{"a":{"b":2}}}`, want: []string{"replace /spec"}},
		{name: "two fields changed", before: `{"metadata":{"name":"p"},"spec":{"a":1}}`,
			after: `{"metadata":{"name":"p","labels":{"x":"y"}},"spec":{"a":2}}`, want: []string{"replace /metadata", "replace /spec"}},
		{name: "a field added", before: `{"metadata":{"name":"p"}}`, after: `{"metadata":{"name":"p"},"spec":{"a":1}}`,
			want: []string{"add /spec"}},
		{name: "a field removed", before: `{"metadata":{"name":"p"},"status":{}}`, after: `{"metadata":{"name":"p"}}`,
			want: []string{"remove /status"}},
		{name: "a key that needs escaping", before: `{"a/b~c":1}`, after: `{"a/b~c":2}`, want: []string{"replace /a~1b~0c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := fieldPatch([]byte(tc.before), []byte(tc.after))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, op := range ops {
				got = append(got, op.Operation+" "+op.Path)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("ops %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("ops %v, want %v", got, tc.want)
				}
			}
			out := applyPatch(t, []byte(tc.before), ops)
			if !jsonpatch4.Equal(out, []byte(tc.after)) {
				t.Errorf("applied: %s, want %s", out, tc.after)
			}
		})
	}
	t.Run("not an object", func(t *testing.T) {
		if _, err := fieldPatch([]byte(`[1]`), []byte(`{}`)); err == nil {
			t.Error("no error for a request object that is not a JSON object")
		}
	})
}
