/*
 * sd_compute_gather.cu: a batch gathered by index from a dataset resident in
 * device memory (symddp_compute.h, sdc_gather_rows): one block per row, the
 * byte table in shared memory.
 */
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

#define SDC_GATHER_THREADS 256

/* VEC: rows of a multiple of 4 values, 16-byte aligned (float source and
 * dst) or 4-byte aligned (byte source): each thread moves 4 values with one
 * load and one store, so that a row of 784 takes one memory round trip per
 * thread instead of four (the batch's rows are spread over the training
 * set, so they come from DRAM, not L2). */
template <bool VEC>
__global__ void __launch_bounds__(SDC_GATHER_THREADS)
    sdc_gather_rows_kernel(float *__restrict__ dst, const void *__restrict__ src, const float *__restrict__ table,
                           const int32_t *__restrict__ idx, int64_t cols) {
    __shared__ float tab[256];
    if (table) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) tab[i] = table[i];
        __syncthreads();
    }
    const int64_t r = blockIdx.x;
    const int32_t i = idx[r];
    float *out = dst + r * cols;
    if (VEC) {
        const int64_t c4 = cols / 4;
        float4 *o4 = (float4 *)out;
        if (i < 0) {
            for (int64_t j = threadIdx.x; j < c4; j += blockDim.x) o4[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        } else if (table) {
            const uchar4 *in = (const uchar4 *)((const unsigned char *)src + (int64_t)i * cols);
            for (int64_t j = threadIdx.x; j < c4; j += blockDim.x) {
                const uchar4 v = in[j];
                o4[j] = make_float4(tab[v.x], tab[v.y], tab[v.z], tab[v.w]);
            }
        } else {
            const float4 *in = (const float4 *)((const float *)src + (int64_t)i * cols);
            for (int64_t j = threadIdx.x; j < c4; j += blockDim.x) o4[j] = in[j];
        }
        return;
    }
    if (i < 0) {
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[j] = 0.0f;
        return;
    }
    if (table) {
        const unsigned char *in = (const unsigned char *)src + (int64_t)i * cols;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[j] = tab[in[j]];
    } else {
        const float *in = (const float *)src + (int64_t)i * cols;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[j] = in[j];
    }
}

extern "C" int sdc_gather_rows(const sdc_ctx *c, uint64_t dst, uint64_t src, uint64_t table, uint64_t idx,
                               int64_t rows, int64_t cols) {
    if (!c || rows < 0 || cols < 0 || rows > 0x7fffffff) return SD_FAIL(SD_ERR_ARG, "sdc_gather_rows: bad arguments");
    if (rows == 0 || cols == 0) return SD_OK;
    if (!dst || !src || !idx) return SD_FAIL(SD_ERR_ARG, "sdc_gather_rows: NULL pointer");
    SD_TRY(sdc_use_device(c->device));
    const bool vec = cols % 4 == 0 && dst % 16 == 0 && src % (table ? 4 : 16) == 0;
    auto k = vec ? sdc_gather_rows_kernel<true> : sdc_gather_rows_kernel<false>;
    k<<<(unsigned)rows, SDC_GATHER_THREADS, 0, (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)dst, (const void *)(uintptr_t)src, (const float *)(uintptr_t)table,
        (const int32_t *)(uintptr_t)idx, cols);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
