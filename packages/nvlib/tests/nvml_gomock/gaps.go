package main

// The NVML calls the go-nvml mock does not implement (their mock functions are unset),
// answered here from the mock's own state so that nothing here invents hardware facts:
//
//   - nvmlDeviceGetComputeMode / nvmlDeviceSetComputeMode: a per-GPU mode, DEFAULT at start;
//   - nvmlDeviceGetGpuInstanceById: looked up among the mock device's GPU instances;
//   - MIG device handles (nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceGetMigDeviceHandleByIndex,
//     nvmlDeviceGetGpuInstanceId, nvmlDeviceGetComputeInstanceId, and nvmlDeviceGetUUID,
//     nvmlDeviceGetMemoryInfo, nvmlDeviceGetAttributes_v2, nvmlDeviceGetHandleByUUID on
//     them): one per compute instance of the mock's GPU instances, as NVML does; the MIG UUID
//     is derived from the parent's UUID and the GI/CI ids, the memory is the GPU instance
//     profile's, the SM and engine counts the compute instance profile's;
//   - the PCI bus id (nvmlPciInfo_t.busId): the mock's GetPciInfo leaves it empty, its device
//     record holds one (Device.PciBusID);
//   - events (nvmlEventSetCreate/Free, nvmlDeviceGetSupportedEventTypes,
//     nvmlDeviceRegisterEvents, nvmlEventSetWait_v2): XID and ECC events are supported and
//     can be registered; the mock GPUs stay healthy, so a wait times out.
//
// nvmlDeviceGetAddressingMode and nvmlDeviceGetGpuFabricInfo(V) are not exported at all, so
// callers see NVML_ERROR_FUNCTION_NOT_FOUND, as with a driver that predates them.

/*
#include "nvml_abi.h"
*/
import "C"

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

var computeModes = struct {
	sync.Mutex
	mode map[*server.Device]nvml.ComputeMode
}{mode: map[*server.Device]nvml.ComputeMode{}}

func gapComputeMode(d *server.Device) nvml.ComputeMode {
	computeModes.Lock()
	defer computeModes.Unlock()
	return computeModes.mode[d]
}

func gapSetComputeMode(d *server.Device, mode nvml.ComputeMode) nvml.Return {
	if mode >= nvml.COMPUTEMODE_COUNT {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	computeModes.Lock()
	defer computeModes.Unlock()
	computeModes.mode[d] = mode
	return nvml.SUCCESS
}

func gapGpuInstanceByID(d *server.Device, id uint32) *server.GpuInstance {
	d.RLock()
	defer d.RUnlock()
	for gi := range d.GpuInstances {
		if gi.Info.Id == id {
			return gi
		}
	}
	return nil
}

func sortedComputeInstances(cis []nvml.ComputeInstance) []nvml.ComputeInstance {
	out := append([]nvml.ComputeInstance(nil), cis...)
	sort.Slice(out, func(i, j int) bool {
		return out[i].(*server.ComputeInstance).Info.Id < out[j].(*server.ComputeInstance).Info.Id
	})
	return out
}

// migDevices lists a GPU's MIG devices in NVML's order: by GPU instance, then compute
// instance id.
func migDevices(d *server.Device) []migDevice {
	d.RLock()
	gis := make([]*server.GpuInstance, 0, len(d.GpuInstances))
	for gi := range d.GpuInstances {
		gis = append(gis, gi)
	}
	d.RUnlock()
	sort.Slice(gis, func(i, j int) bool { return gis[i].Info.Id < gis[j].Info.Id })
	var out []migDevice
	for _, gi := range gis {
		gi.RLock()
		cis := make([]*server.ComputeInstance, 0, len(gi.ComputeInstances))
		for ci := range gi.ComputeInstances {
			cis = append(cis, ci)
		}
		gi.RUnlock()
		sort.Slice(cis, func(i, j int) bool { return cis[i].Info.Id < cis[j].Info.Id })
		for _, ci := range cis {
			out = append(out, migDevice{gpu: d, gi: gi, ci: ci})
		}
	}
	return out
}

// migNamespace keys the MIG UUIDs derived here (a fixed, arbitrary UUID).
var migNamespace = uuid.MustParse("5b0e9a39-3c39-4a8e-9a57-6d2c1c1f4d11")

func (m migDevice) uuid() string {
	name := fmt.Sprintf("%s/gi%d/ci%d", m.gpu.UUID, m.gi.Info.Id, m.ci.Info.Id)
	return "MIG-" + uuid.NewSHA1(migNamespace, []byte(name)).String()
}

func (m migDevice) memoryBytes() (uint64, nvml.Return) {
	profile, ok := giProfileByID(m.gpu, m.gi.Info.ProfileId)
	if !ok {
		return 0, nvml.ERROR_UNKNOWN
	}
	return profile.MemorySizeMB * 1024 * 1024, nvml.SUCCESS
}

func migByUUID(want string) (migDevice, bool) {
	for _, dev := range srv().Devices {
		d, ok := dev.(*server.Device)
		if !ok {
			continue
		}
		for _, m := range migDevices(d) {
			if m.uuid() == want {
				return m, true
			}
		}
	}
	return migDevice{}, false
}

// fillBusID sets the numeric PCI fields from the mock's bus id and returns it in NVML's
// extended form (eight-digit domain).
func fillBusID(d *server.Device, pci *C.nvmlPciInfo_t) string {
	var domain, bus, device, function uint
	if _, err := fmt.Sscanf(d.PciBusID, "%x:%x:%x.%x", &domain, &bus, &device, &function); err != nil {
		return ""
	}
	pci.domain, pci.bus, pci.device = C.uint(domain), C.uint(bus), C.uint(device)
	putName(pci.busIdLegacy[:], fmt.Sprintf("%04x:%02x:%02x.%x", domain, bus, device, function))
	return fmt.Sprintf("%08x:%02x:%02x.%x", domain, bus, device, function)
}

//export nvmlDeviceGetMaxMigDeviceCount
func nvmlDeviceGetMaxMigDeviceCount(h C.nvmlHandle_t, count *C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetMaxMigDeviceCount")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	if d.GetMaxMigDeviceCountFunc != nil {
		n, rc := d.GetMaxMigDeviceCount()
		if rc == nvml.SUCCESS {
			*count = C.uint(n)
		}
		return ret(rc)
	}
	// As many MIG devices as the most numerous GPU instance profile allows (7 on A100).
	n := uint32(0)
	for index := 0; index < nvml.GPU_INSTANCE_PROFILE_COUNT; index++ {
		if info, rc := d.GetGpuInstanceProfileInfo(index); rc == nvml.SUCCESS && info.InstanceCount > n {
			n = info.InstanceCount
		}
	}
	if n == 0 {
		return ret(nvml.ERROR_NOT_SUPPORTED)
	}
	*count = C.uint(n)
	return ret(nvml.SUCCESS)
}

//export nvmlDeviceGetMigDeviceHandleByIndex
func nvmlDeviceGetMigDeviceHandleByIndex(h C.nvmlHandle_t, index C.uint, mig *C.nvmlHandle_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetMigDeviceHandleByIndex")
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	devices := migDevices(d)
	if int(index) >= len(devices) {
		return ret(nvml.ERROR_NOT_FOUND)
	}
	*mig = C.nvmlHandle_t(handleOf(devices[index]))
	return ret(nvml.SUCCESS)
}

//export nvmlDeviceGetAttributes_v2
func nvmlDeviceGetAttributes_v2(h C.nvmlHandle_t, attributes *C.nvmlDeviceAttributes_t) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetAttributes_v2")
	if r, ok := ready(); !ok {
		return r
	}
	m := migOf(uintptr(h))
	if m == nil {
		// nvml.h: "currently only supports MIG device handles".
		if gpuOf(uintptr(h)) != nil {
			return ret(nvml.ERROR_NOT_SUPPORTED)
		}
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	if attributes == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	gip, ok := giProfileByID(m.gpu, m.gi.Info.ProfileId)
	if !ok {
		return ret(nvml.ERROR_UNKNOWN)
	}
	cip, ok := ciProfileByID(m.gi, m.ci.Info.ProfileId)
	if !ok {
		return ret(nvml.ERROR_UNKNOWN)
	}
	*attributes = C.nvmlDeviceAttributes_t{
		multiprocessorCount:       C.uint(cip.MultiprocessorCount),
		sharedCopyEngineCount:     C.uint(cip.SharedCopyEngineCount),
		sharedDecoderCount:        C.uint(cip.SharedDecoderCount),
		sharedEncoderCount:        C.uint(cip.SharedEncoderCount),
		sharedJpegCount:           C.uint(cip.SharedJpegCount),
		sharedOfaCount:            C.uint(cip.SharedOfaCount),
		gpuInstanceSliceCount:     C.uint(gip.SliceCount),
		computeInstanceSliceCount: C.uint(cip.SliceCount),
		memorySizeMB:              C.ulonglong(gip.MemorySizeMB),
	}
	return ret(nvml.SUCCESS)
}

//export nvmlDeviceGetGpuInstanceId
func nvmlDeviceGetGpuInstanceId(h C.nvmlHandle_t, id *C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetGpuInstanceId")
	if r, ok := ready(); !ok {
		return r
	}
	m := migOf(uintptr(h))
	if m == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	*id = C.uint(m.gi.Info.Id)
	return ret(nvml.SUCCESS)
}

//export nvmlDeviceGetComputeInstanceId
func nvmlDeviceGetComputeInstanceId(h C.nvmlHandle_t, id *C.uint) (r C.nvmlReturn_t) {
	defer guard(&r, "nvmlDeviceGetComputeInstanceId")
	if r, ok := ready(); !ok {
		return r
	}
	m := migOf(uintptr(h))
	if m == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	*id = C.uint(m.ci.Info.Id)
	return ret(nvml.SUCCESS)
}

// The event types a data-centre GPU reports as supported (nvml.h's nvmlEventType*).
const supportedEvents = uint64(nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError)

//export nvmlEventSetCreate
func nvmlEventSetCreate(set *C.nvmlHandle_t) C.nvmlReturn_t {
	if r, ok := ready(); !ok {
		return r
	}
	*set = C.nvmlHandle_t(handleOf(&eventSet{masks: map[*server.Device]uint64{}}))
	return ret(nvml.SUCCESS)
}

//export nvmlEventSetFree
func nvmlEventSetFree(set C.nvmlHandle_t) C.nvmlReturn_t {
	if eventSetOf(uintptr(set)) == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	release(uintptr(set))
	return ret(nvml.SUCCESS)
}

//export nvmlDeviceGetSupportedEventTypes
func nvmlDeviceGetSupportedEventTypes(h C.nvmlHandle_t, types *C.ulonglong) C.nvmlReturn_t {
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	*types = C.ulonglong(supportedEvents)
	return ret(nvml.SUCCESS)
}

//export nvmlDeviceRegisterEvents
func nvmlDeviceRegisterEvents(h C.nvmlHandle_t, types C.ulonglong, set C.nvmlHandle_t) C.nvmlReturn_t {
	d, r := fullGpu(h)
	if d == nil {
		return r
	}
	s := eventSetOf(uintptr(set))
	if s == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	if uint64(types)&^supportedEvents != 0 {
		return ret(nvml.ERROR_NOT_SUPPORTED)
	}
	handles.Lock()
	s.masks[d] |= uint64(types)
	handles.Unlock()
	return ret(nvml.SUCCESS)
}

//export nvmlEventSetWait_v2
func nvmlEventSetWait_v2(set C.nvmlHandle_t, data *C.nvmlEventData_t, timeoutMs C.uint) C.nvmlReturn_t {
	if eventSetOf(uintptr(set)) == nil || data == nil {
		return ret(nvml.ERROR_INVALID_ARGUMENT)
	}
	time.Sleep(time.Duration(timeoutMs) * time.Millisecond)
	return ret(nvml.ERROR_TIMEOUT)
}
