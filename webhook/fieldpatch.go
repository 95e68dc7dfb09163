package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
)

// fieldPatch is the diff from before to after, two JSON objects, at the granularity of their
// top-level fields: one op per field that differs, carrying that field whole, in key order.
//
// Why not the library's fine-grained diff: the apiserver applies a webhook's patch with
// gopkg.in/evanphx/json-patch.v4, which decodes every object on an op's path and re-encodes each
// of them, so the six deep ops that make a driver pod a placeholder cost it 1.6-2 times the CPU of
// replacing its metadata and spec whole (BenchmarkApiserverApply), and computing them was half of
// the handler's own time (BenchmarkDriverHandle). Whole fields are only right when after holds
// every field of the request: patched uses this only when the request is byte for byte the
// handler's re-encoding.
func fieldPatch(before, after []byte) ([]jsonpatch.JsonPatchOperation, error) {
	var b, a map[string]json.RawMessage
	if err := json.Unmarshal(before, &b); err != nil {
		return nil, fmt.Errorf("the object before the change: %w", err)
	}
	if err := json.Unmarshal(after, &a); err != nil {
		return nil, fmt.Errorf("the object after the change: %w", err)
	}
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var ops []jsonpatch.JsonPatchOperation
	for _, k := range keys {
		was, had := b[k]
		is, has := a[k]
		// A JSON pointer escapes "~" first, then "/" (RFC 6901).
		path := "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
		switch {
		case !had:
			ops = append(ops, jsonpatch.NewOperation("add", path, is))
		case !has:
			ops = append(ops, jsonpatch.NewOperation("remove", path, nil))
		case !bytes.Equal(was, is):
			ops = append(ops, jsonpatch.NewOperation("replace", path, is))
		}
	}
	return ops, nil
}
