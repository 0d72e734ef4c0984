package main

/*
#include "nvml_abi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// NVML_STRUCT_VERSION: the struct's size with the version in the top byte.
var (
	giProfileInfoV2 = C.uint(C.sizeof_nvmlGpuInstanceProfileInfo_v2_t | 2<<24)
	ciProfileInfoV2 = C.uint(C.sizeof_nvmlComputeInstanceProfileInfo_v2_t | 2<<24)
)

// giProfileByID finds a GPU instance profile by id (the mock indexes them by profile index).
func giProfileByID(d *server.Device, id uint32) (nvml.GpuInstanceProfileInfo, bool) {
	for index := 0; index < nvml.GPU_INSTANCE_PROFILE_COUNT; index++ {
		info, rc := d.GetGpuInstanceProfileInfo(index)
		if rc == nvml.SUCCESS && info.Id == id {
			return info, true
		}
	}
	return nvml.GpuInstanceProfileInfo{}, false
}

// ciProfileByID finds a compute instance profile of gi by id (shared engines).
func ciProfileByID(gi *server.GpuInstance, id uint32) (nvml.ComputeInstanceProfileInfo, bool) {
	for index := 0; index < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; index++ {
		info, rc := gi.GetComputeInstanceProfileInfo(index, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if rc == nvml.SUCCESS && info.Id == id {
			return info, true
		}
	}
	return nvml.ComputeInstanceProfileInfo{}, false
}

//export nvmlDeviceGetGpuInstanceProfileInfoV
func nvmlDeviceGetGpuInstanceProfileInfoV(h C.nvmlHandle_t, profile C.uint, info *C.nvmlGpuInstanceProfileInfo_v2_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetGpuInstanceProfileInfoV")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	if info == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	if info.version != giProfileInfoV2 {
		return ret(nvml.ERROR_ARGUMENT_VERSION_MISMATCH)
	}
	v, rc := d.GetGpuInstanceProfileInfo(int(profile))
	if rc != nvml.SUCCESS {
		return ret(rc)
	}
	*info = C.nvmlGpuInstanceProfileInfo_v2_t{
		version:             giProfileInfoV2,
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
	// The mock's profiles are NVML's v1 records, which carry no name: the name stays empty.
	return ret(nvml.SUCCESS)
}

//export nvmlDeviceGetGpuInstancePossiblePlacements_v2
func nvmlDeviceGetGpuInstancePossiblePlacements_v2(h C.nvmlHandle_t, profileID C.uint, placements *C.nvmlGpuInstancePlacement_t, count *C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetGpuInstancePossiblePlacements_v2")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	if count == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	info, ok := giProfileByID(d, uint32(profileID))
	if !ok {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	got, rc := d.GetGpuInstancePossiblePlacements(&info)
	if rc != nvml.SUCCESS {
		return ret(rc)
	}
	// NVML: a NULL array asks for the count; a short one is INSUFFICIENT_SIZE.
	if placements == nil {
		*count = C.uint(len(got))
		return ret(nvml.SUCCESS)
	}
	if int(*count) < len(got) {
		*count = C.uint(len(got))
		return ret(nvml.ERROR_INSUFFICIENT_SIZE)
	}
	out := unsafe.Slice(placements, len(got))
	for i, p := range got {
		out[i] = C.nvmlGpuInstancePlacement_t{start: C.uint(p.Start), size: C.uint(p.Size)}
	}
	*count = C.uint(len(got))
	return ret(nvml.SUCCESS)
}

//export nvmlDeviceCreateGpuInstanceWithPlacement
func nvmlDeviceCreateGpuInstanceWithPlacement(h C.nvmlHandle_t, profileID C.uint, placement *C.nvmlGpuInstancePlacement_t, gpuInstance *C.nvmlHandle_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceCreateGpuInstanceWithPlacement")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	if placement == nil || gpuInstance == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	info, ok := giProfileByID(d, uint32(profileID))
	if !ok {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	p := nvml.GpuInstancePlacement{Start: uint32(placement.start), Size: uint32(placement.size)}
	gi, rc := d.CreateGpuInstanceWithPlacement(&info, &p)
	if rc == nvml.SUCCESS {
		*gpuInstance = C.nvmlHandle_t(handleOf(gi))
	}
	return ret(rc)
}

//export nvmlDeviceGetGpuInstanceById
func nvmlDeviceGetGpuInstanceById(h C.nvmlHandle_t, id C.uint, gpuInstance *C.nvmlHandle_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetGpuInstanceById")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	var gi nvml.GpuInstance
	rc := nvml.ERROR_NOT_FOUND
	if d.GetGpuInstanceByIdFunc != nil {
		gi, rc = d.GetGpuInstanceById(int(id))
	} else if found := gapGpuInstanceByID(d, uint32(id)); found != nil {
		gi, rc = found, nvml.SUCCESS
	}
	if rc == nvml.SUCCESS {
		*gpuInstance = C.nvmlHandle_t(handleOf(gi))
	}
	return ret(rc)
}

//export nvmlGpuInstanceGetInfo
func nvmlGpuInstanceGetInfo(h C.nvmlHandle_t, info *C.nvmlGpuInstanceInfo_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlGpuInstanceGetInfo")
	if r, ok := ready(); !ok {
		return r
	}
	gi := giOf(uintptr(h))
	if gi == nil || info == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	v, rc := gi.GetInfo()
	if rc != nvml.SUCCESS {
		return ret(rc)
	}
	*info = C.nvmlGpuInstanceInfo_t{
		device:    C.nvmlHandle_t(handleOf(v.Device)),
		id:        C.uint(v.Id),
		profileId: C.uint(v.ProfileId),
		placement: C.nvmlGpuInstancePlacement_t{start: C.uint(v.Placement.Start), size: C.uint(v.Placement.Size)},
	}
	return ret(nvml.SUCCESS)
}

//export nvmlGpuInstanceGetComputeInstanceProfileInfoV
func nvmlGpuInstanceGetComputeInstanceProfileInfoV(h C.nvmlHandle_t, profile, engProfile C.uint, info *C.nvmlComputeInstanceProfileInfo_v2_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlGpuInstanceGetComputeInstanceProfileInfoV")
	if r, ok := ready(); !ok {
		return r
	}
	gi := giOf(uintptr(h))
	if gi == nil || info == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	if info.version != ciProfileInfoV2 {
		return ret(nvml.ERROR_ARGUMENT_VERSION_MISMATCH)
	}
	v, rc := gi.GetComputeInstanceProfileInfo(int(profile), int(engProfile))
	if rc != nvml.SUCCESS {
		return ret(rc)
	}
	*info = C.nvmlComputeInstanceProfileInfo_v2_t{
		version:               ciProfileInfoV2,
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

//export nvmlGpuInstanceCreateComputeInstance
func nvmlGpuInstanceCreateComputeInstance(h C.nvmlHandle_t, profileID C.uint, computeInstance *C.nvmlHandle_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlGpuInstanceCreateComputeInstance")
	if r, ok := ready(); !ok {
		return r
	}
	gi := giOf(uintptr(h))
	if gi == nil || computeInstance == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	info, ok := ciProfileByID(gi, uint32(profileID))
	if !ok {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	ci, rc := gi.CreateComputeInstance(&info)
	if rc == nvml.SUCCESS {
		*computeInstance = C.nvmlHandle_t(handleOf(ci))
	}
	return ret(rc)
}

//export nvmlGpuInstanceGetComputeInstances
func nvmlGpuInstanceGetComputeInstances(h C.nvmlHandle_t, profileID C.uint, computeInstances *C.nvmlHandle_t, count *C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlGpuInstanceGetComputeInstances")
	if r, ok := ready(); !ok {
		return r
	}
	gi := giOf(uintptr(h))
	if gi == nil || computeInstances == nil || count == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	info, ok := ciProfileByID(gi, uint32(profileID))
	if !ok {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	cis, rc := gi.GetComputeInstances(&info)
	if rc != nvml.SUCCESS {
		return ret(rc)
	}
	// The caller's array holds the profile's instance count (nvml.h), no more.
	if len(cis) > int(info.InstanceCount) {
		return ret(nvml.ERROR_INSUFFICIENT_SIZE)
	}
	out := unsafe.Slice(computeInstances, len(cis))
	for i, ci := range sortedComputeInstances(cis) {
		out[i] = C.nvmlHandle_t(handleOf(ci))
	}
	*count = C.uint(len(cis))
	return ret(nvml.SUCCESS)
}

//export nvmlComputeInstanceDestroy
func nvmlComputeInstanceDestroy(h C.nvmlHandle_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlComputeInstanceDestroy")
	if r, ok := ready(); !ok {
		return r
	}
	ci := ciOf(uintptr(h))
	if ci == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	return ret(ci.Destroy())
}

//export nvmlGpuInstanceDestroy
func nvmlGpuInstanceDestroy(h C.nvmlHandle_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlGpuInstanceDestroy")
	if r, ok := ready(); !ok {
		return r
	}
	gi := giOf(uintptr(h))
	if gi == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	return ret(gi.Destroy())
}
