/*
 * The target of every NVML symbol that go-nvml's own cgo wrappers reference but this
 * library does not implement. The build links each of them here (ld --defsym, list taken
 * from a first link), because ctypes loads libraries with RTLD_NOW and would refuse one
 * with undefined symbols. A caller gets NVML_ERROR_FUNCTION_NOT_FOUND, as nvidia-ml-py
 * reports for a symbol the driver's library lacks.
 */
#include "nvml_abi.h"

nvmlReturn_t dra_nvml_gomock_absent(void) { return 13; /* NVML_ERROR_FUNCTION_NOT_FOUND */ }
