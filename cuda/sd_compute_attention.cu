/*
 * sd_compute_attention.cu: the causal softmax of attention and its backward
 * over float32 (compute.Attention's plan in compute/cuda runs them between
 * sdc_gemm_batched's products per head).
 *
 * p is nmat matrices of t x t back to back, row i of each the scores of
 * query i against keys 0..t-1. A row goes to eight lanes of a warp
 * (sd_compute.cuh), which do internal/hostloops' goSoftmaxCausal and
 * goSoftmaxCausalBackward (for a whole matrix: r0 0, width t) in their
 * order: the maximum and the sums in sum8's eight lanes and tail, e^x by
 * exp32, round-to-nearest intrinsics. Lane a reads and writes only the
 * entries a, a+8, ... of its row (the tail's entries reach the other lanes
 * by shuffle), so the rows update in place without a barrier.
 */
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

#define SDC_SOFTMAX_THREADS 256 /* 32 rows a block, eight lanes a row */

/* Row i of each matrix becomes the softmax of its first n = i+1 entries, zeros after (goSoftmaxCausal). */
__global__ void __launch_bounds__(SDC_SOFTMAX_THREADS)
    sdc_softmax_causal_kernel(float *__restrict__ p, int64_t nrows, int64_t t) {
    const int lane = threadIdx.x & 7;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
    const bool ok = row < nrows; /* the lanes of a row past the end still shuffle */
    float *pr = p + (ok ? row : 0) * t;
    const int64_t n = (ok ? row : 0) % t + 1;

    /* max8 of the first n: the lanes' maxima, the tail into lane 0's, then lanes 1..7 */
    const int64_t lead = n & ~(int64_t)7;
    const int nt = ok ? (int)(n - lead) : 0;
    float mx = __int_as_float(0xff800000); /* -inf */
    if (ok)
        for (int64_t j = lane; j < lead; j += 8) {
            const float v = pr[j];
            if (v > mx) mx = v;
        }
    float ms[8], tails[8];
    sdc_lanes8(mx, ms);
    sdc_lanes8(lane < nt ? pr[lead + lane] : 0.0f, tails);
    float m = ms[0];
    for (int i = 0; i < nt; i++)
        if (tails[i] > m) m = tails[i];
    for (int i = 1; i < 8; i++)
        if (ms[i] > m) m = ms[i];

    /*
     * e = exp32(s - m) over the first n, zeros after; its sum8 runs over np,
     * n rounded up to a multiple of eight (at most t): the lanes over the
     * multiple of eight below np, the tail (when np is t) after them.
     */
    const int64_t np = ((n + 7) & ~(int64_t)7) < t ? ((n + 7) & ~(int64_t)7) : t;
    const int64_t lead2 = np & ~(int64_t)7;
    float a = 0.0f, te = 0.0f;
    if (ok)
        for (int64_t j = lane; j < t; j += 8) {
            if (j >= n) {
                pr[j] = 0.0f;
                continue;
            }
            const float e = sdc_exp32(__fsub_rn(pr[j], m));
            pr[j] = e;
            if (j < lead2)
                a = __fadd_rn(a, e);
            else
                te = e; /* entry lead2 + lane of the sum's tail */
        }
    float tes[8];
    sdc_lanes8(te, tes);
    float s = sdc_sum8(a);
    for (int i = 0; i < (int)(np - lead2); i++) s = __fadd_rn(s, tes[i]);
    const float inv = __fdiv_rn(1.0f, s);
    if (!ok) return;
    for (int64_t j = lane; j < n; j += 8) pr[j] = __fmul_rn(pr[j], inv);
}

/* ds row i (the gradient at p's) becomes p * (ds - sum8(p * ds)) over its first i+1, zeros after. */
__global__ void __launch_bounds__(SDC_SOFTMAX_THREADS)
    sdc_softmax_causal_backward_kernel(float *__restrict__ ds, const float *__restrict__ p, int64_t nrows,
                                       int64_t t) {
    const int lane = threadIdx.x & 7;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
    const bool ok = row < nrows;
    const int64_t r = ok ? row : 0;
    float *g = ds + r * t;
    const float *pr = p + r * t;
    const int64_t n = r % t + 1;
    const int64_t lead = n & ~(int64_t)7;
    const int nt = ok ? (int)(n - lead) : 0;
    float a = 0.0f;
    if (ok)
        for (int64_t j = lane; j < lead; j += 8) a = __fadd_rn(a, __fmul_rn(pr[j], g[j]));
    float tails[8];
    sdc_lanes8(lane < nt ? __fmul_rn(pr[lead + lane], g[lead + lane]) : 0.0f, tails);
    float s = sdc_sum8(a);
    for (int i = 0; i < nt; i++) s = __fadd_rn(s, tails[i]);
    if (!ok) return;
    for (int64_t j = lane; j < t; j += 8) g[j] = j < n ? __fmul_rn(pr[j], __fsub_rn(g[j], s)) : 0.0f;
}

/* The blocks of nmat matrices of t rows, or -1 when the sizes do not fit. */
static int64_t sdc_softmax_blocks(int64_t nmat, int64_t t) {
    if (nmat < 0 || t < 0 || (t > 0 && (nmat > INT64_MAX / t || nmat * t > INT64_MAX / t))) return -1;
    const int64_t rows_per_block = SDC_SOFTMAX_THREADS / 8;
    const int64_t blocks = (nmat * t + rows_per_block - 1) / rows_per_block;
    return blocks > 0x7fffffff ? -1 : blocks;
}

extern "C" int sdc_softmax_causal(const sdc_ctx *c, uint64_t p, int64_t nmat, int64_t t) {
    const int64_t blocks = sdc_softmax_blocks(nmat, t);
    if (!c || blocks < 0)
        return SD_FAIL(SD_ERR_ARG, "sdc_softmax_causal: bad arguments (%lld matrices of %lld)", (long long)nmat,
                       (long long)t);
    if (blocks == 0) return SD_OK;
    if (!p) return SD_FAIL(SD_ERR_ARG, "sdc_softmax_causal: NULL pointer");
    SD_TRY(sdc_use_device(c->device));
    sdc_softmax_causal_kernel<<<(unsigned)blocks, SDC_SOFTMAX_THREADS, 0, (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)p, nmat * t, t);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_softmax_causal_backward(const sdc_ctx *c, uint64_t ds, uint64_t p, int64_t nmat, int64_t t) {
    const int64_t blocks = sdc_softmax_blocks(nmat, t);
    if (!c || blocks < 0)
        return SD_FAIL(SD_ERR_ARG, "sdc_softmax_causal_backward: bad arguments (%lld matrices of %lld)",
                       (long long)nmat, (long long)t);
    if (blocks == 0) return SD_OK;
    if (!ds || !p) return SD_FAIL(SD_ERR_ARG, "sdc_softmax_causal_backward: NULL pointer");
    SD_TRY(sdc_use_device(c->device));
    sdc_softmax_causal_backward_kernel<<<(unsigned)blocks, SDC_SOFTMAX_THREADS, 0,
                                         (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)ds, (const float *)(uintptr_t)p, nmat * t, t);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
