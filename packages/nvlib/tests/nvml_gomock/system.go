package main

/*
#include "nvml_abi.h"
*/
import "C"

import (
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

var errorStrings = struct {
	sync.Mutex
	text map[nvml.Return]*C.char
}{text: map[nvml.Return]*C.char{}}

//export nvmlErrorString
func nvmlErrorString(r C.nvmlReturn_t) *C.char {
	errorStrings.Lock()
	defer errorStrings.Unlock()
	code := nvml.Return(r)
	if s, ok := errorStrings.text[code]; ok {
		return s
	}
	// NVML returns static strings; these are made once per code and never freed.
	s := C.CString(code.Error())
	errorStrings.text[code] = s
	return s
}

//export nvmlInit_v2
func nvmlInit_v2() C.nvmlReturn_t { return ret(start()) }

//export nvmlInitWithFlags
func nvmlInitWithFlags(flags C.uint) C.nvmlReturn_t { return ret(start()) }

//export nvmlShutdown
func nvmlShutdown() C.nvmlReturn_t {
	if r, ok := ready(); !ok {
		return r
	}
	return ret(srv().Shutdown())
}

//export nvmlSystemGetDriverVersion
func nvmlSystemGetDriverVersion(version *C.char, length C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlSystemGetDriverVersion")
	if r, ok := ready(); !ok {
		return r
	}
	v, rc := srv().SystemGetDriverVersion()
	if rc != nvml.SUCCESS {
		return ret(rc)
	}
	return putString(version, length, v)
}

//export nvmlSystemGetNVMLVersion
func nvmlSystemGetNVMLVersion(version *C.char, length C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlSystemGetNVMLVersion")
	if r, ok := ready(); !ok {
		return r
	}
	v, rc := srv().SystemGetNVMLVersion()
	if rc != nvml.SUCCESS {
		return ret(rc)
	}
	return putString(version, length, v)
}

//export nvmlSystemGetCudaDriverVersion
func nvmlSystemGetCudaDriverVersion(version *C.int) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlSystemGetCudaDriverVersion")
	if r, ok := ready(); !ok {
		return r
	}
	v, rc := srv().SystemGetCudaDriverVersion()
	if rc == nvml.SUCCESS {
		*version = C.int(v)
	}
	return ret(rc)
}

//export nvmlSystemGetCudaDriverVersion_v2
func nvmlSystemGetCudaDriverVersion_v2(version *C.int) C.nvmlReturn_t {
	return nvmlSystemGetCudaDriverVersion(version)
}

//export nvmlDeviceGetCount_v2
func nvmlDeviceGetCount_v2(count *C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetCount_v2")
	if r, ok := ready(); !ok {
		return r
	}
	n, rc := srv().DeviceGetCount()
	if rc == nvml.SUCCESS {
		*count = C.uint(n)
	}
	return ret(rc)
}

//export nvmlDeviceGetHandleByIndex_v2
func nvmlDeviceGetHandleByIndex_v2(index C.uint, device *C.nvmlHandle_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetHandleByIndex_v2")
	if r, ok := ready(); !ok {
		return r
	}
	d, rc := srv().DeviceGetHandleByIndex(int(index))
	if rc == nvml.SUCCESS {
		*device = C.nvmlHandle_t(handleOf(d))
	}
	return ret(rc)
}

//export nvmlDeviceGetHandleByUUID
func nvmlDeviceGetHandleByUUID(uuid *C.char, device *C.nvmlHandle_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetHandleByUUID")
	if r, ok := ready(); !ok {
		return r
	}
	if uuid == nil || device == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	want := C.GoString(uuid)
	d, rc := srv().DeviceGetHandleByUUID(want)
	if rc == nvml.SUCCESS {
		*device = C.nvmlHandle_t(handleOf(d))
		return ret(rc)
	}
	// The mock knows only full GPUs; MIG devices are found among its instances.
	if m, ok := migByUUID(want); ok {
		*device = C.nvmlHandle_t(handleOf(m))
		return ret(nvml.SUCCESS)
	}
	return ret(rc)
}
