// Package seal tells a placeholder that driverset's webhook made from one a tenant shaped by hand.
//
// S-0's resources come from the placeholder's driverset.dev/resources annotation, and S-0 is
// created by the StatefulSet controller, not by the tenant: admission policies keyed on the
// requesting user never see them. A pod posted already shaped as a placeholder, or one whose
// annotation was edited after admission, would otherwise launder resources (a GPU) into S-0. The
// webhook seals what it records with an HMAC keyed from a Secret its replicas get as a mounted
// file (KeyFile), made by the key-maker (MakeKey), never by driverset's own token; the webhook
// refuses a pre-shaped pod without a valid seal, and the controller builds no StatefulSet from one.
package seal

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
)

// Annotation holds the seal on a placeholder: "v1.<unix seconds>.<base64url HMAC-SHA256>".
const Annotation = "driverset.dev/seal"

// CreatorAnnotation records, under the seal, the user whose create the webhook sealed (the
// AdmissionReview's userInfo.username). The ValidatingAdmissionPolicy driverset-seal-creator refuses
// a sealed placeholder created by anyone else: a seal copied onto a pod posted again under the same
// name within MaxSkew (its first pod deleted) holds only for that same user, who was allowed what
// it records.
const CreatorAnnotation = "driverset.dev/sealed-for"

// MaxSkew bounds how far the seal's time may be from the moment it is checked against: the
// webhook's own re-invocation (seconds later) and the pod's creationTimestamp (set by the
// apiserver right after admission), with room for clocks that disagree. It keeps a seal copied
// from an earlier pod of the same name from being replayed later.
const MaxSkew = 2 * time.Minute

// version prefixes the seal and the signed message, so that a later format is never confused with it.
const version = "v1"

// MinKeyLen is the least key length accepted: the HMAC-SHA256 block of security.
const MinKeyLen = 32

// Sealer seals and checks placeholders with one key. The zero Sealer seals nothing and accepts
// nothing.
type Sealer struct {
	Key []byte
	// Keys, when set, is where the key is read from instead of Key: whatever key it holds now, so
	// a rotated key is used without a restart.
	Keys *KeyFile
	// Now is the time a seal is made at (time.Now when nil).
	Now func() time.Time
	// dryRun marks seals made and checked for a dry-run create (DryRun).
	dryRun bool
}

// DryRun is the Sealer for a dry-run create: its seals hold only for what it checks itself (the
// webhook's re-invocation within the same dry-run), never for a real create or for the
// controller. A dry-run leaves no pod and the name free, so its seal would otherwise be a seal
// for a create the webhook never saw (docs/design.md#sealed-placeholders).
func (s Sealer) DryRun() Sealer {
	s.dryRun = true
	return s
}

// Sign records on pod, a placeholder the webhook has just made in creator's create, a seal over its
// namespace, name, recorded resources and creator (CreatorAnnotation).
func (s Sealer) Sign(pod *corev1.Pod, creator string) error {
	key := s.key()
	if len(key) < MinKeyLen {
		return errors.New("driverset has no key to seal placeholders with")
	}
	if pod.Name == "" {
		return errors.New("driverset seals a placeholder by its name, and this pod has none yet")
	}
	at := s.now().Unix()
	if creator == "" {
		return errors.New("driverset seals a placeholder for the user who creates it, and this create names none")
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[CreatorAnnotation] = creator
	pod.Annotations[Annotation] = version + "." + strconv.FormatInt(at, 10) + "." +
		base64.RawURLEncoding.EncodeToString(s.mac(key, pod.Namespace, pod.Name, at, pod))
	return nil
}

// Verify says why pod's seal is not one this key made for it, at a time within MaxSkew of at, or
// nil when it is. The reason is meant for the pod's owner.
func (s Sealer) Verify(pod *corev1.Pod, at time.Time) error {
	key := s.key()
	if len(key) < MinKeyLen {
		return errors.New("driverset has no key to check placeholder seals with")
	}
	v, ok := pod.Annotations[Annotation]
	if !ok {
		return fmt.Errorf("it has no seal (annotation %s): only driverset's webhook makes placeholders", Annotation)
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 || parts[0] != version {
		return fmt.Errorf("its seal (annotation %s) is not driverset's", Annotation)
	}
	signed, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return fmt.Errorf("its seal (annotation %s) is not driverset's", Annotation)
	}
	if strings.ContainsRune(pod.Annotations[contract.AnnotationResources], 0) || strings.ContainsRune(pod.Annotations[CreatorAnnotation], 0) {
		return fmt.Errorf("its seal (annotation %s) is not driverset's", Annotation)
	}
	got, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err == nil && !s.dryRun && hmac.Equal(got, s.DryRun().mac(key, pod.Namespace, pod.Name, signed, pod)) {
		return fmt.Errorf("its seal (annotation %s) was made for a dry-run create, which leaves no pod: "+
			"it holds for no real one", Annotation)
	}
	if err != nil || !hmac.Equal(got, s.mac(key, pod.Namespace, pod.Name, signed, pod)) {
		return fmt.Errorf("its seal (annotation %s) does not match its name and its recorded resources (annotation %s): "+
			"they were not made by driverset's webhook, or were changed since", Annotation, contract.AnnotationResources)
	}
	if d := at.Sub(time.Unix(signed, 0)); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("its seal (annotation %s) was made %s from when the pod was created: it belongs to another pod",
			Annotation, d.Round(time.Second))
	}
	return nil
}

// VerifyNow is Verify at the Sealer's present: for a seal the webhook itself made moments ago.
func (s Sealer) VerifyNow(pod *corev1.Pod) error { return s.Verify(pod, s.now()) }

// mac is the HMAC of what a seal covers: everything S-0 takes from the placeholder's annotation,
// and the name and namespace, so a seal cannot be moved to another pod; a dry-run's seal has one
// more field, so it is never a real create's; so does one naming its creator. A field is never
// ambiguous: each is ended by a NUL, which none of them can hold (Verify refuses annotations that
// do, which would otherwise pass one field off as several). The name is the pod's final one: the webhook refuses to seal a pod
// that has none yet (named by generateName), whose seal would hold for any name.
// The key is read once by the caller, so that one check never mixes two keys across a rotation.
func (s Sealer) mac(key []byte, namespace, name string, at int64, pod *corev1.Pod) []byte {
	h := hmac.New(sha256.New, key)
	fields := []string{version, namespace, name, strconv.FormatInt(at, 10), pod.Annotations[contract.AnnotationResources]}
	// A seal made before seals named their creator has no such field, and still holds for the
	// placeholders it was made for; any change to the annotation, its removal included, breaks a
	// seal that names one.
	if creator, ok := pod.Annotations[CreatorAnnotation]; ok {
		fields = append(fields, "creator", creator)
	}
	if s.dryRun {
		fields = append(fields, "dry-run")
	}
	for _, field := range fields {
		h.Write([]byte(field))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// key is the key to seal and check with now.
func (s Sealer) key() []byte {
	if s.Keys != nil {
		return s.Keys.Key()
	}
	return s.Key
}

func (s Sealer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
