/*
 * sd_compute_cast.cu: fp32 to bf16 and back, element by element (a bf16
 * gradient allreduce: the gradients cast down, reduced, cast back up; the
 * bf16 copy of the fp32 master weights that the bf16 GEMMs and kernels read).
 *
 * The rounding is done on the bits, as the emulated device does it
 * (compute/cuda/cudatest's bf16FromF32): sdc_bf16_rn of sd_compute.cuh adds
 * 0x7fff plus the lowest kept bit and keeps the high half, which rounds to
 * nearest with ties to even and overflows to infinity; every NaN becomes the
 * quiet NaN 0x7fc0. The way back puts the bf16 bits in the high half of an
 * fp32, which is exact.
 */
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

#define SDC_CAST_THREADS 256

__global__ void sdc_cast_bf16_kernel(uint16_t *__restrict__ dst, const float *__restrict__ src, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = sdc_bf16_rn(src[i]);
    }
}

/* As sdc_cast_bf16_kernel, unless *flag says the copy is current. */
__global__ void sdc_cast_bf16_unless_kernel(uint16_t *__restrict__ dst, const float *__restrict__ src, int64_t n,
                                            const uint32_t *__restrict__ flag) {
    if (*flag) return;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = sdc_bf16_rn(src[i]);
    }
}

__global__ void sdc_cast_f32_kernel(float *__restrict__ dst, const uint16_t *__restrict__ src, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = __uint_as_float((uint32_t)src[i] << 16);
}

static unsigned sdc_cast_blocks(int64_t n, int sm_count) {
    return (unsigned)sdc_grid(n, SDC_CAST_THREADS, sm_count, 16);
}

extern "C" int sdc_cast_bf16(const sdc_ctx *c, uint64_t dst, uint64_t src, int64_t n) {
    if (!c || n < 0 || (n > 0 && (!dst || !src || dst % 2 || src % 4)))
        return SD_FAIL(SD_ERR_ARG, "sdc_cast_bf16: bad arguments");
    if (n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    sdc_cast_bf16_kernel<<<sdc_cast_blocks(n, c->sm_count), SDC_CAST_THREADS, 0, (cudaStream_t)(uintptr_t)c->stream>>>(
        (uint16_t *)(uintptr_t)dst, (const float *)(uintptr_t)src, n);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_cast_bf16_unless(const sdc_ctx *c, uint64_t dst, uint64_t src, int64_t n, uint64_t flag) {
    if (!c || n < 0 || !flag || flag % 4 || (n > 0 && (!dst || !src || dst % 2 || src % 4)))
        return SD_FAIL(SD_ERR_ARG, "sdc_cast_bf16_unless: bad arguments");
    if (n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    const cudaStream_t s = (cudaStream_t)(uintptr_t)c->stream;
    sdc_cast_bf16_unless_kernel<<<sdc_cast_blocks(n, c->sm_count), SDC_CAST_THREADS, 0, s>>>(
        (uint16_t *)(uintptr_t)dst, (const float *)(uintptr_t)src, n, (const uint32_t *)(uintptr_t)flag);
    SD_CUDA(cudaGetLastError());
    /* after every block has read it (stream order) */
    SD_CUDA(cudaMemsetAsync((void *)(uintptr_t)flag, 0, sizeof(uint32_t), s));
    return SD_OK;
}

extern "C" int sdc_cast_f32(const sdc_ctx *c, uint64_t dst, uint64_t src, int64_t n) {
    if (!c || n < 0 || (n > 0 && (!dst || !src || dst % 4 || src % 2)))
        return SD_FAIL(SD_ERR_ARG, "sdc_cast_f32: bad arguments");
    if (n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    sdc_cast_f32_kernel<<<sdc_cast_blocks(n, c->sm_count), SDC_CAST_THREADS, 0, (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)dst, (const uint16_t *)(uintptr_t)src, n);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
