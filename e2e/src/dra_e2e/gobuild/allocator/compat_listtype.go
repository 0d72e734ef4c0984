//go:build !kube135 && !kube134

package main

// DRAListTypeAttributes exists from Kubernetes 1.36 on: list-valued attributes in the
// allocator and `includes` in the CEL environment. The 1.34/1.35 builds have neither
// (compat_nolisttype.go).

import (
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

func init() {
	gateNames["DRAListTypeAttributes"] = func(f *structured.Features, on bool) { f.ListTypeAttributes = on }
}

// celFeatures is the CEL environment the allocator's cache compiles selectors in.
func celFeatures(f structured.Features) dracel.Features {
	return celCompilerFeatures(f.ConsumableCapacity, f.ListTypeAttributes)
}

func celCompilerFeatures(consumable, listType bool) dracel.Features {
	return dracel.Features{EnableConsumableCapacity: consumable, EnableListTypeAttributes: listType}
}
