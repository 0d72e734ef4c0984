package main

/*
#include "nvml_abi.h"
*/
import "C"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// The MIG queries go-nvlib makes to describe an existing MIG device (its MigDevice.GetProfile
// and the parent lookup), as nvidia-container-toolkit does for `nvidia-ctk cdi generate`.

//export nvmlDeviceIsMigDeviceHandle
func nvmlDeviceIsMigDeviceHandle(h C.nvmlHandle_t, isMig *C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceIsMigDeviceHandle")
	if r, ok := ready(); !ok {
		return r
	}
	if isMig == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	switch {
	case migOf(uintptr(h)) != nil:
		*isMig = 1
	case gpuOf(uintptr(h)) != nil:
		*isMig = 0
	default:
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	return ret(nvml.SUCCESS)
}

//export nvmlDeviceGetDeviceHandleFromMigDeviceHandle
func nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h C.nvmlHandle_t, device *C.nvmlHandle_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
	if r, ok := ready(); !ok {
		return r
	}
	m := migOf(uintptr(h))
	if m == nil || device == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	*device = C.nvmlHandle_t(handleOf(m.gpu))
	return ret(nvml.SUCCESS)
}

//export nvmlDeviceGetGpuInstanceProfileInfo
func nvmlDeviceGetGpuInstanceProfileInfo(h C.nvmlHandle_t, profile C.uint, info *C.nvmlGpuInstanceProfileInfo_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetGpuInstanceProfileInfo")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	if info == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	v, rc := d.GetGpuInstanceProfileInfo(int(profile))
	if rc != nvml.SUCCESS {
		return ret(rc)
	}
	*info = C.nvmlGpuInstanceProfileInfo_t{
		id:                  C.uint(v.Id),
		isP2pSupported:      C.uint(v.IsP2pSupported),
		sliceCount:          C.uint(v.SliceCount),
		instanceCount:       C.uint(v.InstanceCount),
		multiprocessorCount: C.uint(v.MultiprocessorCount),
		copyEngineCount:     C.uint(v.CopyEngineCount),
		decoderCount:        C.uint(v.DecoderCount),
		encoderCount:        C.uint(v.EncoderCount),
		jpegCount:           C.uint(v.JpegCount),
		ofaCount:            C.uint(v.OfaCount),
		memorySizeMB:        C.ulonglong(v.MemorySizeMB),
	}
	return ret(nvml.SUCCESS)
}

//export nvmlGpuInstanceGetComputeInstanceProfileInfo
func nvmlGpuInstanceGetComputeInstanceProfileInfo(h C.nvmlHandle_t, profile, engProfile C.uint, info *C.nvmlComputeInstanceProfileInfo_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlGpuInstanceGetComputeInstanceProfileInfo")
	if r, ok := ready(); !ok {
		return r
	}
	gi := giOf(uintptr(h))
	if gi == nil || info == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	v, rc := gi.GetComputeInstanceProfileInfo(int(profile), int(engProfile))
	if rc != nvml.SUCCESS {
		return ret(rc)
	}
	*info = C.nvmlComputeInstanceProfileInfo_t{
		id:                    C.uint(v.Id),
		sliceCount:            C.uint(v.SliceCount),
		instanceCount:         C.uint(v.InstanceCount),
		multiprocessorCount:   C.uint(v.MultiprocessorCount),
		sharedCopyEngineCount: C.uint(v.SharedCopyEngineCount),
		sharedDecoderCount:    C.uint(v.SharedDecoderCount),
		sharedEncoderCount:    C.uint(v.SharedEncoderCount),
		sharedJpegCount:       C.uint(v.SharedJpegCount),
		sharedOfaCount:        C.uint(v.SharedOfaCount),
	}
	return ret(nvml.SUCCESS)
}

//export nvmlGpuInstanceGetComputeInstanceById
func nvmlGpuInstanceGetComputeInstanceById(h C.nvmlHandle_t, id C.uint, computeInstance *C.nvmlHandle_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlGpuInstanceGetComputeInstanceById")
	if r, ok := ready(); !ok {
		return r
	}
	gi := giOf(uintptr(h))
	if gi == nil || computeInstance == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	gi.RLock()
	defer gi.RUnlock()
	for ci := range gi.ComputeInstances {
		if ci.Info.Id == uint32(id) {
			*computeInstance = C.nvmlHandle_t(handleOf(ci))
			return ret(nvml.SUCCESS)
		}
	}
	return ret(nvml.ERROR_NOT_FOUND)
}

//export nvmlComputeInstanceGetInfo_v2
func nvmlComputeInstanceGetInfo_v2(h C.nvmlHandle_t, info *C.nvmlComputeInstanceInfo_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlComputeInstanceGetInfo_v2")
	if r, ok := ready(); !ok {
		return r
	}
	ci := ciOf(uintptr(h))
	if ci == nil || info == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	v := ci.Info
	var device, gpuInstance C.nvmlHandle_t
	if d, ok := v.Device.(*server.Device); ok {
		device = C.nvmlHandle_t(handleOf(d))
	}
	if gi, ok := v.GpuInstance.(*server.GpuInstance); ok {
		gpuInstance = C.nvmlHandle_t(handleOf(gi))
	}
	*info = C.nvmlComputeInstanceInfo_t{
		device:      device,
		gpuInstance: gpuInstance,
		id:          C.uint(v.Id),
		profileId:   C.uint(v.ProfileId),
		placement:   C.nvmlComputeInstancePlacement_t{start: C.uint(v.Placement.Start), size: C.uint(v.Placement.Size)},
	}
	return ret(nvml.SUCCESS)
}
