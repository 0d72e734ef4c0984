package main

/*
#include "nvml_abi.h"
*/
import "C"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// fullGpu resolves a handle that must name a full GPU; a MIG device handle answers
// NOT_SUPPORTED (as NVML does for GPU-only queries), anything else INVALID_ARGUMENT.
func fullGpu(h C.nvmlHandle_t) (*server.Device, C.nvmlReturn_t) {
	if r, ok := ready(); !ok {
		return nil, r
	}
	if d := gpuOf(uintptr(h)); d != nil {
		return d, ret(nvml.SUCCESS)
	}
	if migOf(uintptr(h)) != nil {
		return nil, ret(nvml.ERROR_NOT_SUPPORTED)
	}
	return nil, ret(nvml.ERROR_INVALID_ARGUMENT)
}

//export nvmlDeviceGetUUID
func nvmlDeviceGetUUID(h C.nvmlHandle_t, uuid *C.char, length C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetUUID")
	if m := migOf(uintptr(h)); m != nil {
		return putString(uuid, length, m.uuid())
	}
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	v, rc := d.GetUUID()
	if rc != nvml.SUCCESS {
		return ret(rc)
	}
	return putString(uuid, length, v)
}

//export nvmlDeviceGetName
func nvmlDeviceGetName(h C.nvmlHandle_t, name *C.char, length C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetName")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	v, rc := d.GetName()
	if rc != nvml.SUCCESS {
		return ret(rc)
	}
	return putString(name, length, v)
}

//export nvmlDeviceGetBrand
func nvmlDeviceGetBrand(h C.nvmlHandle_t, brand *C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetBrand")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	v, rc := d.GetBrand()
	if rc == nvml.SUCCESS {
		*brand = C.uint(v)
	}
	return ret(rc)
}

//export nvmlDeviceGetArchitecture
func nvmlDeviceGetArchitecture(h C.nvmlHandle_t, arch *C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetArchitecture")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	v, rc := d.GetArchitecture()
	if rc == nvml.SUCCESS {
		*arch = C.uint(v)
	}
	return ret(rc)
}

//export nvmlDeviceGetCudaComputeCapability
func nvmlDeviceGetCudaComputeCapability(h C.nvmlHandle_t, major, minor *C.int) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetCudaComputeCapability")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	ma, mi, rc := d.GetCudaComputeCapability()
	if rc == nvml.SUCCESS {
		*major, *minor = C.int(ma), C.int(mi)
	}
	return ret(rc)
}

//export nvmlDeviceGetMinorNumber
func nvmlDeviceGetMinorNumber(h C.nvmlHandle_t, minor *C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetMinorNumber")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	v, rc := d.GetMinorNumber()
	if rc == nvml.SUCCESS {
		*minor = C.uint(v)
	}
	return ret(rc)
}

//export nvmlDeviceGetMemoryInfo
func nvmlDeviceGetMemoryInfo(h C.nvmlHandle_t, memory *C.nvmlMemory_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetMemoryInfo")
	if m := migOf(uintptr(h)); m != nil {
		total, rc := m.memoryBytes()
		if rc == nvml.SUCCESS {
			*memory = C.nvmlMemory_t{total: C.ulonglong(total), free: C.ulonglong(total)}
		}
		return ret(rc)
	}
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	v, rc := d.GetMemoryInfo()
	if rc == nvml.SUCCESS {
		*memory = C.nvmlMemory_t{total: C.ulonglong(v.Total), free: C.ulonglong(v.Free), used: C.ulonglong(v.Used)}
	}
	return ret(rc)
}

//export nvmlDeviceGetPciInfo_v3
func nvmlDeviceGetPciInfo_v3(h C.nvmlHandle_t, pci *C.nvmlPciInfo_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetPciInfo_v3")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	v, rc := d.GetPciInfo()
	if rc != nvml.SUCCESS {
		return ret(rc)
	}
	*pci = C.nvmlPciInfo_t{
		domain:         C.uint(v.Domain),
		bus:            C.uint(v.Bus),
		device:         C.uint(v.Device),
		pciDeviceId:    C.uint(v.PciDeviceId),
		pciSubSystemId: C.uint(v.PciSubSystemId),
	}
	busID := cString(v.BusId[:])
	if busID == "" {
		busID = fillBusID(d, pci)
	}
	putName(pci.busId[:], busID)
	if legacy := cString(v.BusIdLegacy[:]); legacy != "" {
		putName(pci.busIdLegacy[:], legacy)
	}
	return ret(nvml.SUCCESS)
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

//export nvmlDeviceGetMigMode
func nvmlDeviceGetMigMode(h C.nvmlHandle_t, current, pending *C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetMigMode")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	cur, pend, rc := d.GetMigMode()
	if rc == nvml.SUCCESS {
		*current, *pending = C.uint(cur), C.uint(pend)
	}
	return ret(rc)
}

//export nvmlDeviceSetMigMode
func nvmlDeviceSetMigMode(h C.nvmlHandle_t, mode C.uint, activation *C.nvmlReturn_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceSetMigMode")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	status, rc := d.SetMigMode(int(mode))
	if rc == nvml.SUCCESS && activation != nil {
		*activation = ret(status)
	}
	return ret(rc)
}

//export nvmlDeviceGetComputeMode
func nvmlDeviceGetComputeMode(h C.nvmlHandle_t, mode *C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetComputeMode")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	if d.GetComputeModeFunc == nil {
		*mode = C.uint(gapComputeMode(d))
		return ret(nvml.SUCCESS)
	}
	v, rc := d.GetComputeMode()
	if rc == nvml.SUCCESS {
		*mode = C.uint(v)
	}
	return ret(rc)
}

//export nvmlDeviceSetComputeMode
func nvmlDeviceSetComputeMode(h C.nvmlHandle_t, mode C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceSetComputeMode")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	if d.SetComputeModeFunc == nil {
		return ret(gapSetComputeMode(d, nvml.ComputeMode(mode)))
	}
	return ret(d.SetComputeMode(nvml.ComputeMode(mode)))
}
