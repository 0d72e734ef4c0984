/*
 * A small C stand-in for libnvidia-ml.so.1, used only by dra-nvlib's tests.
 *
 * It exports the NVML entry points the NVML backend calls, with NVML's C ABI, so the real
 * code path (nvidia-ml-py -> ctypes -> shared library) runs without a GPU. It models
 * A100-SXM4-40GB GPUs (2, or NVML_STUB_GPUS up to 8) with the MIG user guide's placement
 * table and refuses overlapping or
 * unlisted placements the way NVML does. nvmlDeviceGetAddressingMode is deliberately absent
 * (as in drivers before 570) so the "function not found" path is exercised too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
enum {
    OK = 0, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, NOT_FOUND = 6, INSUFFICIENT_SIZE = 7,
    TIMEOUT = 10, IN_USE = 19, INSUFFICIENT_RESOURCES = 23, INVALID_STATE = 29
};

#define MAXGPU 8
#define MAXGI 8

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned int start, size; } nvmlGpuInstancePlacement_t;
typedef struct {
    unsigned int version, id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount,
        copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
    char name[96];
} nvmlGpuInstanceProfileInfo_v2_t;
typedef struct {
    unsigned int version, id, sliceCount, instanceCount, multiprocessorCount,
        sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount, sharedJpegCount,
        sharedOfaCount;
    char name[96];
} nvmlComputeInstanceProfileInfo_v2_t;
typedef struct {
    void *device;
    unsigned int id, profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;
typedef struct {
    void *device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

struct gpu;
typedef struct gi {
    int kind; /* first in every handle: 2 = GPU instance / compute instance / MIG device */
    int used, id, profile, start, size, has_ci, ci_profile;
    struct gpu *gpu;
} gi_t;
typedef struct gpu {
    int kind; /* first in every handle: 1 = physical GPU */
    int index, mig_current, mig_pending, compute_mode;
    char uuid[48], bus[24];
    gi_t gis[MAXGI];
} gpu_t;

static gpu_t gpus[MAXGPU];
static unsigned int ngpu;
static const unsigned int buses[MAXGPU] = {0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD};

struct profile {
    int index, id, slices, count, mem_mib, sms, ce, dec, jpeg, ofa, size;
    const char *name;
    int starts[8], nstarts;
};
static const struct profile profiles[] = {
    {0, 19, 1, 7, 4864, 14, 1, 0, 0, 0, 1, "MIG 1g.5gb", {0, 1, 2, 3, 4, 5, 6}, 7},
    {7, 20, 1, 1, 4864, 14, 1, 1, 1, 1, 1, "MIG 1g.5gb+me", {0, 1, 2, 3, 4, 5, 6}, 7},
    {9, 15, 1, 4, 9856, 14, 1, 1, 0, 0, 2, "MIG 1g.10gb", {0, 2, 4, 6}, 4},
    {1, 14, 2, 3, 9856, 28, 2, 1, 0, 0, 2, "MIG 2g.10gb", {0, 2, 4}, 3},
    {2, 9, 3, 2, 19968, 42, 3, 2, 0, 0, 4, "MIG 3g.20gb", {0, 4}, 2},
    {3, 5, 4, 1, 19968, 56, 4, 2, 0, 0, 4, "MIG 4g.20gb", {0}, 1},
    {4, 0, 7, 1, 40192, 98, 7, 5, 1, 1, 8, "MIG 7g.40gb", {0}, 1},
};
#define NPROFILES (int)(sizeof(profiles) / sizeof(profiles[0]))
static const int ci_slices[] = {1, 2, 3, 4, 7}; /* CI profile index -> slices (ids = index) */

static int event_set_token;

static const struct profile *by_id(int id) {
    for (int i = 0; i < NPROFILES; i++)
        if (profiles[i].id == id) return &profiles[i];
    return NULL;
}
static gpu_t *as_gpu(void *h) { return (h && ((gpu_t *)h)->kind == 1) ? (gpu_t *)h : NULL; }
static gi_t *as_gi(void *h) { return (h && ((gi_t *)h)->kind == 2) ? (gi_t *)h : NULL; }
static void mig_uuid(const gi_t *g, char *out, unsigned int len) {
    snprintf(out, len, "MIG-%08x-0000-4000-8000-%012x", 0x5eed0000u + (unsigned)g->gpu->index,
             (unsigned)g->id);
}

const char *nvmlErrorString(nvmlReturn_t r) { return r == OK ? "Success" : "Stub NVML error"; }
nvmlReturn_t nvmlInit_v2(void) {
    const char *want = getenv("NVML_STUB_GPUS");
    if (ngpu) return OK;
    ngpu = want ? (unsigned)atoi(want) : 2;
    if (ngpu < 1 || ngpu > MAXGPU) ngpu = 2;
    for (unsigned int i = 0; i < ngpu; i++) {
        gpus[i].kind = 1;
        gpus[i].index = (int)i;
        snprintf(gpus[i].uuid, sizeof gpus[i].uuid, "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a%02x", i);
        snprintf(gpus[i].bus, sizeof gpus[i].bus, "00000000:%02X:00.0", buses[i]);
    }
    return OK;
}
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown(void) { return OK; }
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int n) {
    snprintf(v, n, "550.54.15"); return OK;
}
nvmlReturn_t nvmlSystemGetNVMLVersion(char *v, unsigned int n) {
    snprintf(v, n, "12.550.54.15"); return OK;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { *v = 12040; return OK; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) { *n = ngpu; return OK; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) {
    if (i >= ngpu) return INVALID_ARGUMENT;
    *h = &gpus[i]; return OK;
}
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, void **h) {
    char buf[96];
    for (unsigned int i = 0; i < ngpu; i++) {
        if (strcmp(uuid, gpus[i].uuid) == 0) { *h = &gpus[i]; return OK; }
        for (int j = 0; j < MAXGI; j++) {
            if (!gpus[i].gis[j].used || !gpus[i].gis[j].has_ci) continue;
            mig_uuid(&gpus[i].gis[j], buf, sizeof buf);
            if (strcmp(uuid, buf) == 0) { *h = &gpus[i].gis[j]; return OK; }
        }
    }
    return NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetUUID(void *h, char *out, unsigned int n) {
    if (as_gpu(h)) { snprintf(out, n, "%s", as_gpu(h)->uuid); return OK; }
    if (as_gi(h)) { mig_uuid(as_gi(h), out, n); return OK; }
    return INVALID_ARGUMENT;
}
nvmlReturn_t nvmlDeviceGetName(void *h, char *out, unsigned int n) {
    if (!as_gpu(h)) return NOT_SUPPORTED;
    snprintf(out, n, "NVIDIA A100-SXM4-40GB"); return OK;
}
nvmlReturn_t nvmlDeviceGetBrand(void *h, unsigned int *b) { (void)h; *b = 14; return OK; }
nvmlReturn_t nvmlDeviceGetArchitecture(void *h, unsigned int *a) { (void)h; *a = 7; return OK; }
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(void *h, int *major, int *minor) {
    (void)h; *major = 8; *minor = 0; return OK;
}
nvmlReturn_t nvmlDeviceGetMinorNumber(void *h, unsigned int *m) {
    if (!as_gpu(h)) return NOT_SUPPORTED;
    *m = (unsigned)as_gpu(h)->index; return OK;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(void *h, nvmlMemory_t *m) {
    unsigned long long mib = 40960;
    if (as_gi(h)) mib = (unsigned long long)by_id(as_gi(h)->profile)->mem_mib;
    else if (!as_gpu(h)) return INVALID_ARGUMENT;
    m->total = mib << 20; m->used = 0; m->free = m->total; return OK;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(void *h, nvmlPciInfo_t *p) {
    gpu_t *g = as_gpu(h);
    if (!g) return NOT_SUPPORTED;
    memset(p, 0, sizeof *p);
    snprintf(p->busId, sizeof p->busId, "%s", g->bus);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%s", g->bus + 4);
    p->pciDeviceId = 0x20B010DE;
    return OK;
}
nvmlReturn_t nvmlDeviceGetComputeMode(void *h, unsigned int *m) {
    if (!as_gpu(h)) return NOT_SUPPORTED;
    *m = (unsigned)as_gpu(h)->compute_mode; return OK;
}
nvmlReturn_t nvmlDeviceSetComputeMode(void *h, unsigned int m) {
    if (!as_gpu(h)) return NOT_SUPPORTED;
    if (m > 3) return INVALID_ARGUMENT;
    as_gpu(h)->compute_mode = (int)m; return OK;
}
nvmlReturn_t nvmlDeviceGetMigMode(void *h, unsigned int *cur, unsigned int *pend) {
    if (!as_gpu(h)) return NOT_SUPPORTED;
    *cur = (unsigned)as_gpu(h)->mig_current; *pend = (unsigned)as_gpu(h)->mig_pending;
    return OK;
}
nvmlReturn_t nvmlDeviceSetMigMode(void *h, unsigned int mode, nvmlReturn_t *status) {
    gpu_t *g = as_gpu(h);
    if (!g) return NOT_SUPPORTED;
    if (mode > 1) return INVALID_ARGUMENT;
    for (int j = 0; j < MAXGI && mode == 0; j++)
        if (g->gis[j].used) return IN_USE;
    g->mig_current = g->mig_pending = (int)mode;
    *status = OK;
    return OK;
}
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(void *h, void *info) {
    (void)h; (void)info; return NOT_SUPPORTED; /* A100 predates the fabric API */
}
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(void *h, unsigned int index,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info) {
    if (!as_gpu(h)) return NOT_SUPPORTED;
    for (int i = 0; i < NPROFILES; i++) {
        const struct profile *p = &profiles[i];
        if (p->index != (int)index) continue;
        info->id = (unsigned)p->id; info->isP2pSupported = 0;
        info->sliceCount = (unsigned)p->slices; info->instanceCount = (unsigned)p->count;
        info->multiprocessorCount = (unsigned)p->sms; info->copyEngineCount = (unsigned)p->ce;
        info->decoderCount = (unsigned)p->dec; info->encoderCount = 0;
        info->jpegCount = (unsigned)p->jpeg; info->ofaCount = (unsigned)p->ofa;
        info->memorySizeMB = (unsigned long long)p->mem_mib;
        snprintf(info->name, sizeof info->name, "%s", p->name);
        return OK;
    }
    return NOT_SUPPORTED;
}
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    void *h, unsigned int id, nvmlGpuInstancePlacement_t *out, unsigned int *count) {
    const struct profile *p = by_id((int)id);
    if (!as_gpu(h) || !p) return INVALID_ARGUMENT;
    if (out)
        for (int i = 0; i < p->nstarts; i++) {
            out[i].start = (unsigned)p->starts[i]; out[i].size = (unsigned)p->size;
        }
    *count = (unsigned)p->nstarts;
    return OK;
}
nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(
    void *h, unsigned int id, const nvmlGpuInstancePlacement_t *pl, void **out) {
    gpu_t *g = as_gpu(h);
    const struct profile *p = by_id((int)id);
    int listed = 0, same = 0, slices = 0, free_slot = -1;
    if (!g || !p) return INVALID_ARGUMENT;
    if (!g->mig_current) return INVALID_STATE;
    for (int i = 0; i < p->nstarts; i++)
        if ((unsigned)p->starts[i] == pl->start && (unsigned)p->size == pl->size) listed = 1;
    if (!listed) return INVALID_ARGUMENT;
    for (int j = 0; j < MAXGI; j++) {
        gi_t *o = &g->gis[j];
        if (!o->used) { if (free_slot < 0) free_slot = j; continue; }
        if (o->profile == p->id) same++;
        slices += by_id(o->profile)->slices;
        if ((int)pl->start < o->start + o->size && o->start < (int)(pl->start + pl->size))
            return INSUFFICIENT_RESOURCES;
    }
    if (same >= p->count || slices + p->slices > 7 || free_slot < 0) return INSUFFICIENT_RESOURCES;
    gi_t *n = &g->gis[free_slot];
    memset(n, 0, sizeof *n);
    n->kind = 2; n->used = 1; n->id = free_slot + 1; n->profile = p->id;
    n->start = (int)pl->start; n->size = (int)pl->size; n->gpu = g;
    *out = n;
    return OK;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceById(void *h, unsigned int id, void **out) {
    gpu_t *g = as_gpu(h);
    if (!g) return INVALID_ARGUMENT;
    for (int j = 0; j < MAXGI; j++)
        if (g->gis[j].used && g->gis[j].id == (int)id) { *out = &g->gis[j]; return OK; }
    return NOT_FOUND;
}
nvmlReturn_t nvmlGpuInstanceGetInfo(void *h, nvmlGpuInstanceInfo_t *info) {
    gi_t *g = as_gi(h);
    if (!g) return INVALID_ARGUMENT;
    info->device = g->gpu; info->id = (unsigned)g->id; info->profileId = (unsigned)g->profile;
    info->placement.start = (unsigned)g->start; info->placement.size = (unsigned)g->size;
    return OK;
}
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    void *h, unsigned int index, unsigned int eng, nvmlComputeInstanceProfileInfo_v2_t *info) {
    gi_t *g = as_gi(h);
    (void)eng;
    if (!g || index >= 5) return INVALID_ARGUMENT;
    if (ci_slices[index] > by_id(g->profile)->slices) return NOT_SUPPORTED;
    info->id = index; info->sliceCount = (unsigned)ci_slices[index];
    info->instanceCount = (unsigned)(by_id(g->profile)->slices / ci_slices[index]);
    info->multiprocessorCount = (unsigned)(14 * ci_slices[index]);
    snprintf(info->name, sizeof info->name, "MIG %dc", ci_slices[index]);
    return OK;
}
nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(void *h, unsigned int ci_profile, void **out) {
    gi_t *g = as_gi(h);
    if (!g || ci_profile >= 5) return INVALID_ARGUMENT;
    if (g->has_ci) return INSUFFICIENT_RESOURCES;
    g->has_ci = 1; g->ci_profile = (int)ci_profile; *out = g;
    return OK;
}
nvmlReturn_t nvmlGpuInstanceGetComputeInstances(void *h, unsigned int ci_profile, void **out,
                                                unsigned int *count) {
    gi_t *g = as_gi(h);
    if (!g) return INVALID_ARGUMENT;
    *count = 0;
    if (g->has_ci && g->ci_profile == (int)ci_profile) { out[0] = g; *count = 1; }
    return OK;
}
nvmlReturn_t nvmlComputeInstanceDestroy(void *h) {
    gi_t *g = as_gi(h);
    if (!g || !g->has_ci) return INVALID_ARGUMENT;
    g->has_ci = 0; return OK;
}
nvmlReturn_t nvmlGpuInstanceDestroy(void *h) {
    gi_t *g = as_gi(h);
    if (!g) return INVALID_ARGUMENT;
    if (g->has_ci) return IN_USE;
    g->used = 0; g->kind = 0; return OK;
}
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(void *h, unsigned int *n) {
    if (!as_gpu(h)) return NOT_SUPPORTED;
    *n = 7; return OK;
}
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(void *h, unsigned int index, void **out) {
    gpu_t *g = as_gpu(h);
    unsigned int seen = 0;
    if (!g) return INVALID_ARGUMENT;
    for (int j = 0; j < MAXGI; j++) {
        if (!g->gis[j].used || !g->gis[j].has_ci) continue;
        if (seen++ == index) { *out = &g->gis[j]; return OK; }
    }
    return NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceId(void *h, unsigned int *id) {
    if (!as_gi(h)) return INVALID_ARGUMENT;
    *id = (unsigned)as_gi(h)->id; return OK;
}
nvmlReturn_t nvmlDeviceGetComputeInstanceId(void *h, unsigned int *id) {
    if (!as_gi(h)) return INVALID_ARGUMENT;
    *id = 0; return OK;
}
nvmlReturn_t nvmlEventSetCreate(void **set) { *set = &event_set_token; return OK; }
nvmlReturn_t nvmlEventSetFree(void *set) { (void)set; return OK; }
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(void *h, unsigned long long *types) {
    (void)h; *types = 0x1 | 0x2 | 0x8; return OK;
}
nvmlReturn_t nvmlDeviceRegisterEvents(void *h, unsigned long long types, void *set) {
    (void)types; (void)set;
    return as_gpu(h) ? OK : INVALID_ARGUMENT;
}
nvmlReturn_t nvmlEventSetWait_v2(void *set, nvmlEventData_t *data, unsigned int timeout_ms) {
    (void)set; (void)data; (void)timeout_ms;
    return TIMEOUT; /* the stub GPUs stay healthy */
}
