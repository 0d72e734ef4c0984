//go:build !kube134

package main

// From Kubernetes 1.35 on the allocator has one switch for binding conditions, on only
// when both gates are (the 1.34 build, compat_v134.go, has one switch per gate).

import "k8s.io/dynamic-resource-allocation/structured"

func setBinding(f *structured.Features) {
	f.DeviceBindingAndStatus = bindingConditions && claimDeviceStatus
}
