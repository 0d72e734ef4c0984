//go:build kube135

package main

// The Kubernetes 1.35 build (gobuild/allocator/versions/v1.35.4.mod, tag kube135):
// DeviceTaintRule is still alpha (resource.k8s.io/v1alpha3), and the gates that 1.37's
// allocator added do not exist (accepted, changing nothing).

import (
	resourcealpha "k8s.io/api/resource/v1alpha3"
	"k8s.io/client-go/informers"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/dynamic-resource-allocation/structured"
)

type deviceTaintRule = resourcealpha.DeviceTaintRule

func trackerOptions(factory informers.SharedInformerFactory, consumable bool) tracker.Options {
	return tracker.Options{
		EnableDeviceTaintRules:   true,
		EnableConsumableCapacity: consumable,
		SliceInformer:            factory.Resource().V1().ResourceSlices(),
		TaintInformer:            factory.Resource().V1alpha3().DeviceTaintRules(),
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
