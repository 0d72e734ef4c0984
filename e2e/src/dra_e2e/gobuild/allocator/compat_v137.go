//go:build !kube136 && !kube135 && !kube134

package main

// What differs in Kubernetes 1.37 from the 1.36 build (compat_v136.go, tag kube136):
// DeviceTaintRule is GA in resource.k8s.io/v1, and the allocator has four more features.

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/informers"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/dynamic-resource-allocation/structured"
)

type deviceTaintRule = resourceapi.DeviceTaintRule

func trackerOptions(factory informers.SharedInformerFactory, consumable bool) tracker.Options {
	return tracker.Options{
		EnableDeviceTaintRules:   true,
		EnableConsumableCapacity: consumable,
		SliceInformer:            factory.Resource().V1().ResourceSlices(),
		TaintInformer:            factory.Resource().V1().DeviceTaintRules(),
	}
}

func init() {
	gateNames["DRAFractionalCapacityRange"] = func(f *structured.Features, on bool) { f.FractionalCapacityRange = on }
	gateNames["DRAOptionalNodeOperations"] = func(f *structured.Features, on bool) { f.OptionalNodeOperations = on }
	gateNames["DRADerivedAttributes"] = func(f *structured.Features, on bool) { f.DerivedAttributes = on }
	gateNames["DRADeviceCompatibilityGroups"] = func(f *structured.Features, on bool) { f.CompatibilityGroups = on }
}
