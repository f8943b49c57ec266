/*
 * sd_compute_vec.cu: vector kernels: dst += src (gradient accumulation),
 * x *= s, and the sum of squares in double with a fixed order.
 *
 * Sum of squares: G blocks of 256 threads in the fixed order of
 * sd_reduce.cuh. G depends only on n, the SM count and the scratch, so the
 * result is the same bits on every run. sdc_sum_squares_enqueue leaves it in
 * device memory (a shard's part of the sharded update's gradient check);
 * sdc_sum_squares reads it back and waits.
 */
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "sd_reduce.cuh"
#include "symddp_compute.h"

#define SDC_VEC_THREADS 256
/* Counter 1 is the sum-of-squares ticket. */
#define SDC_SUMSQ_COUNTER 1

static unsigned sdc_vec_blocks(int64_t items, int sm_count) {
    return (unsigned)sdc_grid(items, SDC_VEC_THREADS, sm_count, 16);
}

/* dst (n) += src (n); float4 over the first n4 vectors when aligned, then the tail. */
__global__ void sdc_accumulate_kernel(float *__restrict__ dst, const float *__restrict__ src, int64_t n,
                                      int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    float4 *d4 = (float4 *)dst;
    const float4 *s4 = (const float4 *)src;
    for (int64_t i = t; i < n4; i += stride) {
        float4 a = d4[i];
        const float4 b = s4[i];
        a.x = __fadd_rn(a.x, b.x);
        a.y = __fadd_rn(a.y, b.y);
        a.z = __fadd_rn(a.z, b.z);
        a.w = __fadd_rn(a.w, b.w);
        d4[i] = a;
    }
    for (int64_t i = n4 * 4 + t; i < n; i += stride) dst[i] = __fadd_rn(dst[i], src[i]);
}

/* x (n) *= s, likewise. */
__global__ void sdc_scale_kernel(float *__restrict__ x, float s, int64_t n, int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    float4 *x4 = (float4 *)x;
    for (int64_t i = t; i < n4; i += stride) {
        float4 a = x4[i];
        a.x = __fmul_rn(a.x, s);
        a.y = __fmul_rn(a.y, s);
        a.z = __fmul_rn(a.z, s);
        a.w = __fmul_rn(a.w, s);
        x4[i] = a;
    }
    for (int64_t i = n4 * 4 + t; i < n; i += stride) x[i] = __fmul_rn(x[i], s);
}

extern "C" int sdc_accumulate(const sdc_ctx *c, uint64_t dst, uint64_t src, int64_t n) {
    if (!c || n < 0) return SD_FAIL(SD_ERR_ARG, "sdc_accumulate: bad arguments");
    if (n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    const int64_t n4 = sdc_aligned16(dst) && sdc_aligned16(src) ? n / 4 : 0;
    sdc_accumulate_kernel<<<sdc_vec_blocks(n4 ? n4 : n, c->sm_count), SDC_VEC_THREADS, 0,
                            (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)dst, (const float *)(uintptr_t)src, n, n4);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_scale(const sdc_ctx *c, uint64_t x, float s, int64_t n) {
    if (!c || n < 0) return SD_FAIL(SD_ERR_ARG, "sdc_scale: bad arguments");
    if (n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    const int64_t n4 = sdc_aligned16(x) ? n / 4 : 0;
    sdc_scale_kernel<<<sdc_vec_blocks(n4 ? n4 : n, c->sm_count), SDC_VEC_THREADS, 0,
                       (cudaStream_t)(uintptr_t)c->stream>>>((float *)(uintptr_t)x, s, n, n4);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/* See the file comment. out receives the total. */
__global__ void __launch_bounds__(SDC_SUMSQ_THREADS)
    sdc_sumsq_kernel(const float *__restrict__ x, int64_t n, double *partial, uint32_t *ticket_word,
                     double *out) {
    sdc_wait_prior_grid();
    __shared__ double s[32];
    double t;
    if (sdc_sum_squares_grid(x, n, partial, ticket_word, s, &t)) *out = t;
}

extern "C" int sdc_sum_squares_enqueue(const sdc_ctx *c, uint64_t x, int64_t n, uint64_t out) {
    if (!c || n < 0 || !out || out % sizeof(double) != 0 || (n > 0 && !x))
        return SD_FAIL(SD_ERR_ARG, "sdc_sum_squares_enqueue: bad arguments");
    SD_TRY(sdc_use_device(c->device));
    /* n == 0 runs too: one block that adds nothing writes 0. */
    SD_CUDA(sdc_launch(sdc_sumsq_kernel, dim3(sdc_sum_squares_blocks(c, n)), dim3(SDC_SUMSQ_THREADS),
                       (cudaStream_t)(uintptr_t)c->stream, (const float *)(uintptr_t)x, n,
                       (double *)(uintptr_t)c->scratch, (uint32_t *)(uintptr_t)c->counters + SDC_SUMSQ_COUNTER,
                       (double *)(uintptr_t)out));
    return SD_OK;
}

extern "C" int sdc_sum_squares(const sdc_ctx *c, uint64_t x, int64_t n, int64_t timeout_ns,
                               double *out) {
    if (!c || !out || n < 0) return SD_FAIL(SD_ERR_ARG, "sdc_sum_squares: bad arguments");
    *out = 0;
    if (n == 0) return SD_OK;
    SD_TRY(sdc_sum_squares_enqueue(c, x, n, c->result));
    cudaStream_t st = (cudaStream_t)(uintptr_t)c->stream;
    double *host = (double *)(uintptr_t)c->host_result;
    SD_CUDA(cudaMemcpyAsync(host, (const double *)(uintptr_t)c->result, sizeof(double), cudaMemcpyDeviceToHost, st));
    SD_TRY(sdc_sync(c, timeout_ns));
    *out = *host;
    return SD_OK;
}
