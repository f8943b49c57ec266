/*
 * sd_compute_skinny.cu: the project's own kernels for GEMMs with one tiny
 * dimension, candidates of the GEMM tuner (sd_compute_lt.cu) beside
 * cuBLASLt's algorithms.
 *
 * A classifier head (256 inputs to 10 classes) gives GEMMs that cuBLASLt
 * runs as a tiled kernel over a handful of tiles plus a split-K reduction
 * kernel: two launches of several microseconds each on the critical path of
 * a small model's step. With one dimension of at most 16 the product is a
 * set of short dot products that one kernel does directly:
 *
 *   SDC_SKINNY_N: C (m, n <= 16) = A (m,k) B^T with B stored (n,k) (NT), then
 *     C += bias[col] (SDC_EPI_BIAS) or nothing (SDC_EPI_NONE). One warp per
 *     row of C: lane l takes k-elements l, l+32, ... and keeps n sums; each
 *     sum is then a warp butterfly.
 *   SDC_SKINNY_K: C (m,n) = A (m, k <= 16) B (k,n) (NN), then for
 *     SDC_EPI_DRELU_BGRAD C = 0 where cuBLASLt's ReLU mask bit is clear and
 *     bias[col] = the column sums of C (or nothing, SDC_EPI_NONE). A block of
 *     32 columns x 32 row groups: a thread keeps its column of B in
 *     registers and walks rows g, g+32, ...; the 32 partial column sums are
 *     added in row-group order.
 *
 * Every sum has a fixed order (deterministic, no atomics). The order differs
 * from cuBLASLt's, so the low bits do; the tuner compares each against
 * cuBLASLt on random operands before it may be used, which also checks the
 * mask layout read here: bit i*aux_ld + j (byte / 8, bit % 8) for row i,
 * column j of C, cuBLASLt's column-major mask over C^T.
 */
#include <stdint.h>

#include "sd_compute.cuh"
#include "sd_internal.h"
#include "sd_skinny.cuh"
#include "symddp_compute.h"

#define SDC_SKINNY_WARPS 8
#define SDC_SKINNY_K_GROUPS 32

__global__ void __launch_bounds__(SDC_SKINNY_WARPS * 32)
    sdc_skinny_n_kernel(const float *__restrict__ a, int64_t lda, const float *__restrict__ b, int64_t ldb,
                        float *__restrict__ c, int64_t ldc, int64_t m, int n, int64_t k,
                        const float *__restrict__ bias) {
    sdc_wait_prior_grid();
    const int lane = threadIdx.x & 31;
    const int64_t step = (int64_t)gridDim.x * SDC_SKINNY_WARPS;
    for (int64_t i = (int64_t)blockIdx.x * SDC_SKINNY_WARPS + (threadIdx.x >> 5); i < m; i += step) {
        float acc[SDC_SKINNY_MAX];
#pragma unroll
        for (int col = 0; col < SDC_SKINNY_MAX; col++) acc[col] = 0.0f;
        const float *ar = a + i * lda;
        /* Unrolled so that the loads of several iterations are in flight
         * together: one iteration at a time waits out a memory latency per
         * 32 elements of k (the same sums, in the same order). */
#pragma unroll 4
        for (int64_t kk = lane; kk < k; kk += 32) {
            const float x = ar[kk];
#pragma unroll
            for (int col = 0; col < SDC_SKINNY_MAX; col++)
                if (col < n) acc[col] = fmaf(x, __ldg(b + col * ldb + kk), acc[col]);
        }
#pragma unroll
        for (int col = 0; col < SDC_SKINNY_MAX; col++) {
            if (col < n) { /* n is the same for the whole warp */
                float v = acc[col];
                for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
                if (lane == col) c[i * ldc + col] = bias ? v + bias[col] : v;
            }
        }
    }
}

__global__ void __launch_bounds__(SDC_SKINNY_K_GROUPS * 32)
    sdc_skinny_k_kernel(const float *__restrict__ a, int64_t lda, const float *__restrict__ b, int64_t ldb,
                        float *__restrict__ c, int64_t ldc, int64_t m, int64_t n, int k,
                        const uint8_t *__restrict__ aux, int64_t aux_ld, float *__restrict__ bias) {
    sdc_wait_prior_grid();
    __shared__ float part[SDC_SKINNY_K_GROUPS][33];
    const int jj = threadIdx.x & 31, grp = threadIdx.x >> 5;
    const int64_t j = (int64_t)blockIdx.x * 32 + jj;
    const bool in = j < n;
    float bc[SDC_SKINNY_MAX];
#pragma unroll
    for (int t = 0; t < SDC_SKINNY_MAX; t++) bc[t] = (in && t < k) ? b[t * ldb + j] : 0.0f;
    float sum = 0.0f;
#pragma unroll 4
    for (int64_t i = grp; i < m; i += SDC_SKINNY_K_GROUPS) {
        const float *ar = a + i * lda; /* the same row for the whole warp: broadcast loads */
        float v = 0.0f;
#pragma unroll
        for (int t = 0; t < SDC_SKINNY_MAX; t++)
            if (t < k) v = fmaf(ar[t], bc[t], v);
        if (!in) continue;
        if (aux) {
            const int64_t bit = i * aux_ld + j;
            if (!((aux[bit >> 3] >> (bit & 7)) & 1u)) v = 0.0f;
        }
        c[i * ldc + j] = v;
        sum += v;
    }
    if (!bias) return; /* the same for the whole block */
    part[grp][jj] = sum;
    __syncthreads();
    if (grp == 0 && in) {
        float t = part[0][jj];
        for (int g = 1; g < SDC_SKINNY_K_GROUPS; g++) t += part[g][jj];
        bias[j] = t;
    }
}

int sdc_skinny_kind(const sdc_lt_args *g) {
    if (g->m <= 0 || g->n <= 0 || g->k <= 0 || g->m * g->n > ((int64_t)1 << 22)) return SDC_SKINNY_NONE;
    if (!g->trans_a && g->trans_b && g->n <= SDC_SKINNY_MAX &&
        (g->epilogue == SDC_EPI_NONE || g->epilogue == SDC_EPI_BIAS))
        return SDC_SKINNY_N;
    if (!g->trans_a && !g->trans_b && g->k <= SDC_SKINNY_MAX &&
        (g->epilogue == SDC_EPI_NONE || g->epilogue == SDC_EPI_DRELU_BGRAD))
        return SDC_SKINNY_K;
    return SDC_SKINNY_NONE;
}

cudaError_t sdc_skinny_launch(int kind, const sdc_lt_args *g, int sm_count, const void *a, const void *b, void *cm,
                              cudaStream_t st) {
    const float *A = (const float *)a, *B = (const float *)b;
    float *C = (float *)cm;
    if (kind == SDC_SKINNY_N) {
        const int64_t blocks = sdc_grid(g->m, SDC_SKINNY_WARPS, sm_count, 16); /* a warp per row */
        return sdc_launch(sdc_skinny_n_kernel, dim3((unsigned)blocks), dim3(SDC_SKINNY_WARPS * 32), st, A, g->lda, B,
                          g->ldb, C, g->ldc, g->m, (int)g->n, g->k,
                          g->epilogue == SDC_EPI_BIAS ? (const float *)(uintptr_t)g->bias : NULL);
    }
    if (kind == SDC_SKINNY_K) {
        const bool drelu = g->epilogue == SDC_EPI_DRELU_BGRAD;
        return sdc_launch(sdc_skinny_k_kernel, dim3((unsigned)((g->n + 31) / 32)), dim3(SDC_SKINNY_K_GROUPS * 32), st, A,
                          g->lda, B, g->ldb, C, g->ldc, g->m, g->n, (int)g->k,
                          drelu ? (const uint8_t *)(uintptr_t)g->aux : NULL, g->aux_ld,
                          drelu ? (float *)(uintptr_t)g->bias : NULL);
    }
    return cudaErrorInvalidValue;
}

/* Pseudo-random words (a hash of the index and seed): floats in [-1, 1)
 * when floats, else raw bits. */
__global__ void sdc_fill_random_kernel(uint32_t *p, int64_t words, uint32_t seed, int floats) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 0x9e3779b1u ^ seed;
        h ^= h >> 16;
        h *= 0x85ebca6bu;
        h ^= h >> 13;
        h *= 0xc2b2ae35u;
        h ^= h >> 16;
        p[i] = floats ? __float_as_uint((float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f) : h;
    }
}

cudaError_t sdc_fill_random(void *p, int64_t words, uint32_t seed, int floats, cudaStream_t st) {
    if (words <= 0) return cudaSuccess;
    int64_t blocks = (words + 255) / 256;
    if (blocks > 1024) blocks = 1024;
    sdc_fill_random_kernel<<<(unsigned)blocks, 256, 0, st>>>((uint32_t *)p, words, seed, floats);
    return cudaGetLastError();
}
