/*
 * sd_compute.cuh: small helpers every part of the compute engine
 * (sd_compute_*.cu) shares.
 */
#pragma once

#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>

#include "sd_internal.h"

/* Makes device current on the calling thread when it is not: every compute
 * entry point does this first, because Go moves goroutines between threads
 * and the CUDA runtime's current device belongs to the thread. */
static inline int sdc_use_device(int device) {
    int cur = -1;
    SD_CUDA(cudaGetDevice(&cur));
    if (cur != device) SD_CUDA(cudaSetDevice(device));
    return SD_OK;
}

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
