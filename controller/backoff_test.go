package controller

import (
	"testing"
	"time"
)

func TestWaitRequeue(t *testing.T) {
	for _, tc := range []struct {
		waited, want time.Duration
	}{
		{0, time.Second},
		{-time.Minute, time.Second}, // a clock skew: as a new wait
		{3 * time.Second, time.Second},
		{8 * time.Second, 2 * time.Second},
		{time.Minute, 15 * time.Second},
		{2 * time.Minute, 30 * time.Second},
		{24 * time.Hour, 30 * time.Second},
	} {
		if got := waitRequeue(tc.waited); got != tc.want {
			t.Errorf("waitRequeue(%s) = %s, want %s", tc.waited, got, tc.want)
		}
	}
}
