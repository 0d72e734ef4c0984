package main

/*
#include "nvml_abi.h"
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func ret(r nvml.Return) C.nvmlReturn_t { return C.nvmlReturn_t(r) }

// putString copies s into the caller's buffer of n bytes, NUL-terminated, as NVML does.
func putString(dst *C.char, n C.uint, s string) C.nvmlReturn_t {
	if dst == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	if uint(len(s))+1 > uint(n) {
		return ret(nvml.ERROR_INSUFFICIENT_SIZE)
	}
	buf := unsafe.Slice((*byte)(unsafe.Pointer(dst)), int(n))
	copy(buf, s)
	buf[len(s)] = 0
	return ret(nvml.SUCCESS)
}

// putName fills a fixed char array (a struct's name field).
func putName(dst []C.char, s string) {
	if len(s) >= len(dst) {
		s = s[:len(dst)-1]
	}
	for i := 0; i < len(s); i++ {
		dst[i] = C.char(s[i])
	}
	dst[len(s)] = 0
}

// guard turns a panic inside the mock (a mock function that is not set panics when called)
// into NVML_ERROR_UNKNOWN with the reason on stderr, instead of killing the host process.
func guard(r *C.nvmlReturn_t, function string) {
	if p := recover(); p != nil {
		fmt.Fprintf(os.Stderr, "nvml-gomock: %s: the go-nvml mock failed: %v\n", function, p)
		*r = ret(nvml.ERROR_UNKNOWN)
	}
}

// ready is NVML_ERROR_UNINITIALIZED until nvmlInit succeeded.
func ready() (C.nvmlReturn_t, bool) {
	if srv() == nil {
		return ret(nvml.ERROR_UNINITIALIZED), false
	}
	return ret(nvml.SUCCESS), true
}
