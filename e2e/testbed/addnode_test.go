//go:build testbed

package testbed

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testAddNodeLeavesNothingWhenItFails: an AddNode that fails half way (here its context ends
// before the node can turn Ready; in a chaos run, the apiserver restarts under it) leaves neither
// a Node object nor a kwok nor the name in the test bed's books, so that it can be tried again.
func testAddNodeLeavesNothingWhenItFails(t *testing.T, c *Cluster) {
	const name = "half-made"
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := c.AddNode(ctx, name); err == nil {
		t.Fatal("AddNode succeeded within 200ms: the scenario proves nothing")
	}
	if _, err := c.node(name); err == nil {
		t.Error("the test bed still counts the node")
	}
	if _, err := c.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Node object is left (get: %v)", err)
	}
	if err := c.AddNode(t.Context(), name); err != nil {
		t.Fatalf("AddNode of the same name again: %v", err)
	}
	if err := c.DeleteNode(context.Background(), name); err != nil {
		t.Error(err)
	}
}
