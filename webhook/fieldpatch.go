package webhook

import (
	"reflect"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
)

// fieldPatch is the diff from was to pod at the granularity of a pod's top-level fields: one
// replace per field that changed, carrying the field's Go value, in key order. ok is false when
// the kind or apiVersion changed, which no handler does and this does not carry.
//
// Why not the library's fine-grained diff: the apiserver applies a webhook's patch with
// gopkg.in/evanphx/json-patch.v4, which decodes every object on an op's path and re-encodes each
// of them, so the six deep ops that make a driver pod a placeholder cost it 1.6-2 times the CPU of
// replacing its metadata and spec whole (BenchmarkApiserverApply), and computing them was half of
// the handler's own time (BenchmarkDriverHandle). Why Go values, not JSON: the answer's patch is
// then encoded once, with the response, rather than encoded, split into fields, compared and
// copied into the response again (BenchmarkDriverServe).
//
// Whole fields are only right when pod holds every field of the request: patched uses this only
// when the request is byte for byte was's encoding. That encoding always has metadata, spec and
// status (encoding/json never omits a struct), so replace always finds them. Fields are compared
// exactly, as Go values (reflect.DeepEqual; equality.Semantic took a tenth of the handler's
// time): a field the handler set to what the apiserver would decode the same is replaced,
// harmlessly, and a pod the handler left alone (a placeholder seen again) gets no op at all.
func fieldPatch(was, pod *corev1.Pod) (ops []jsonpatch.JsonPatchOperation, ok bool) {
	if was.TypeMeta != pod.TypeMeta {
		return nil, false
	}
	for _, f := range []struct {
		path    string
		was, is any
	}{
		{"/metadata", &was.ObjectMeta, &pod.ObjectMeta},
		{"/spec", &was.Spec, &pod.Spec},
		{"/status", &was.Status, &pod.Status},
	} {
		if !reflect.DeepEqual(f.was, f.is) {
			ops = append(ops, jsonpatch.NewOperation("replace", f.path, f.is))
		}
	}
	return ops, true
}
