package main

// A panic in upstream's allocator becomes the case's error instead of ending the batch:
// Kubernetes 1.35's allocator dereferences a nil pool when an allocationMode All request
// reaches a device that consumes counters (fixed in 1.36), which crashes a 1.35 scheduler.

import (
	"context"
	"fmt"

	"k8s.io/dynamic-resource-allocation/structured"
)

func allocateRecovering(ctx context.Context, in *input, claimKeys []string, only string, features structured.Features) (out outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = outcome{exit: exitError, err: fmt.Errorf("upstream allocator panicked: %v", r)}
		}
	}()
	return allocate(ctx, in, claimKeys, only, features)
}
