package certs

import (
	"bytes"
	"testing"
	"time"
)

func TestMergeBundleIsCanonical(t *testing.T) {
	older := mustCA(t, "older", t0, time.Hour)
	newer := mustCA(t, "newer", t0.Add(time.Minute), time.Hour)
	twin := mustCA(t, "twin", t0.Add(time.Minute), time.Hour) // same NotBefore as newer

	for _, tc := range []struct {
		name string
		a, b Bundle
	}{
		{"order of the CAs does not matter", Bundle{older.Cert, newer.Cert}, Bundle{newer.Cert, older.Cert}},
		{"equal start times are ordered by bytes", Bundle{newer.Cert, twin.Cert}, Bundle{twin.Cert, newer.Cert}},
		{"duplicates are dropped", Bundle{older.Cert, older.Cert, newer.Cert}, Bundle{newer.Cert, older.Cert}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, y := mergeBundle(tc.a...).PEM(), mergeBundle(tc.b...).PEM()
			if !bytes.Equal(x, y) {
				t.Errorf("%v and %v merge to different bytes", names(tc.a), names(tc.b))
			}
		})
	}
	if got := names(mergeBundle(older.Cert, newer.Cert)); got[0] != "newer" || len(got) != 2 {
		t.Errorf("merge = %v, want newest first", got)
	}
}

func TestBundleRoundTrip(t *testing.T) {
	a := mustCA(t, "a", t0, time.Hour)
	b := mustCA(t, "b", t0, 2*time.Hour)
	text := append([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), mergeBundle(a.Cert, b.Cert).PEM()...)
	got, err := ParseBundle(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got.Contains(a.Cert) || !got.Contains(b.Cert) {
		t.Fatalf("parsed %v, want a and b (other blocks skipped)", names(got))
	}
	if _, err := ParseBundle([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")); err == nil {
		t.Error("a broken certificate parses")
	}
	if v := got.validAt(t0.Add(90 * time.Minute)); len(v) != 1 || !v.Contains(b.Cert) {
		t.Errorf("valid after a expired: %v, want b", names(v))
	}
}
