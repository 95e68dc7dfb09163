//go:build testbed

package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"
)

// TestDemo runs `make demo`, the README's first command on a fresh machine, as a newcomer would, and holds its story
// to what the README shows: the placeholder, the driver kept Terminating on its dead node, still
// one driver 5 s later, the new driver on another node after the taint with an app id of its own
// and the same address, and spark-submit's end. run checks each of these before it says it, so a driverset
// that broke any of them fails here, not only in a newcomer's first minutes.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, &out)
	t.Logf("the demo said:\n%s", out.String())
	if err != nil {
		t.Fatalf("the demo failed: %v", err)
	}
	// In this order, one line each.
	story := []string{
		`was admitted as a placeholder: scheduling gate \[driverset\.dev/placeholder\], node "" — it will never run`,
		`driverset made StatefulSet \S+ and headless Service \S+-ds; the driver runs in \S+-0 on kwok-node-\d`,
		`Node kwok-node-\d dies`,
		`is evicted but stays Terminating`,
		`5 s later: still one driver pod`,
		`kubectl taint node kwok-node-\d node\.kubernetes\.io/out-of-service=nodeshutdown:NoExecute`,
		`a new \S+-0 \(uid \w+\) runs on kwok-node-\d`,
		`the driver starts again there as app spark-\w+-[0-9a-f]{8} \(the submitted spark-\w+, this incarnation's own\), at the same address \S+-0\.\S+-ds\.default\.svc`,
		`spark-submit returned: driver pod phases \[.*Succeeded\], exit code 0`,
	}
	rest := out.String()
	for _, line := range story {
		loc := regexp.MustCompile(line).FindStringIndex(rest)
		if loc == nil {
			t.Fatalf("the demo did not say, after what came before, a line matching %q", line)
		}
		rest = rest[loc[1]:]
	}
}
