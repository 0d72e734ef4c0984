//go:build kube135 || kube134

package main

// Kubernetes 1.34 and 1.35 have no DRAListTypeAttributes: the gate is accepted and
// changes nothing, as on a scheduler that does not know it (compat_listtype.go has
// the 1.36+ side).

import (
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

func init() {
	gateNames["DRAListTypeAttributes"] = func(*structured.Features, bool) {}
}

// celFeatures is the CEL environment the allocator's cache compiles selectors in.
func celFeatures(f structured.Features) dracel.Features {
	return celCompilerFeatures(f.ConsumableCapacity, false)
}

func celCompilerFeatures(consumable, _ bool) dracel.Features {
	return dracel.Features{EnableConsumableCapacity: consumable}
}
