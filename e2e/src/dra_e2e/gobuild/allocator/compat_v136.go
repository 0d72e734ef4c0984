//go:build kube136

package main

// The Kubernetes 1.36 build (gobuild/allocator/versions/v1.36.5.mod, tag kube136):
// DeviceTaintRule is served as resource.k8s.io/v1beta2, and the gates that 1.37's
// allocator added do not exist (they are accepted and change nothing, as on a 1.36
// scheduler that does not know them).

import (
	resourcebeta "k8s.io/api/resource/v1beta2"
	"k8s.io/client-go/informers"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/dynamic-resource-allocation/structured"
)

type deviceTaintRule = resourcebeta.DeviceTaintRule

func trackerOptions(factory informers.SharedInformerFactory, consumable bool) tracker.Options {
	return tracker.Options{
		EnableDeviceTaintRules:   true,
		EnableConsumableCapacity: consumable,
		SliceInformer:            factory.Resource().V1().ResourceSlices(),
		TaintInformer:            factory.Resource().V1beta2().DeviceTaintRules(),
		ClassInformer:            factory.Resource().V1().DeviceClasses(),
	}
}

func init() {
	for _, gate := range []string{
		"DRAFractionalCapacityRange", "DRAOptionalNodeOperations",
		"DRADerivedAttributes", "DRADeviceCompatibilityGroups",
	} {
		gateNames[gate] = func(*structured.Features, bool) {}
	}
}
