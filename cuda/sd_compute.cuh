/*
 * sd_compute.cuh: small helpers every part of the compute engine
 * (sd_compute_*.cu) shares.
 */
#pragma once

#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "sd_internal.h"

/* Makes device current on the calling thread (sd_use_device): every compute
 * entry point does this first. */
static inline int sdc_use_device(int device) { return sd_use_device(device); }

/* Whether v fits the int that cuBLAS takes for a size. */
static inline bool sdc_fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* Blocks for items work items at per_block items a block: at most per_sm
 * blocks per SM of a device with sm_count SMs, at least one. */
static inline int64_t sdc_grid(int64_t items, int64_t per_block, int sm_count, int per_sm) {
    int64_t g = (items + per_block - 1) / per_block;
    const int64_t cap = (int64_t)(sm_count > 0 ? sm_count : 1) * per_sm;
    if (g > cap) g = cap;
    return g < 1 ? 1 : g;
}

/*
 * Programmatic dependent launch (Hopper): the step's own kernels are
 * launched with cudaLaunchAttributeProgrammaticStreamSerialization, so the
 * GPU may start one while the kernel before it on the stream finishes
 * (its blocks are placed and its launch work done), and each such kernel
 * first waits in sdc_wait_prior_grid until every kernel before it has
 * completed and its writes are visible: the same order of effects, less
 * idle time between the short kernels of a small model's step (a kernel
 * boundary costs microseconds in a replayed graph). SYMDDP_CUDA_PDL=0
 * launches them plainly.
 */
static __device__ __forceinline__ void sdc_wait_prior_grid(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Whether the step's kernels use programmatic dependent launch (read once). */
static inline bool sdc_pdl(void) {
    static const bool on = [] {
        const char *v = getenv("SYMDDP_CUDA_PDL");
        return !(v && v[0] == '0');
    }();
    return on;
}

/* Launches kernel k on stream st, with programmatic dependent launch when
 * sdc_pdl() (see above); k must begin with sdc_wait_prior_grid. */
template <typename... Params, typename... Args>
static inline cudaError_t sdc_launch(void (*k)(Params...), dim3 grid, dim3 block, cudaStream_t st, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = 0;
    cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = sdc_pdl() ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, static_cast<Params>(args)...);
}
