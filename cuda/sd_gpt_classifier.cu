/*
 * sd_gpt_classifier.cu: fused softmax cross-entropy over bf16 logits, the
 * gradient written in place (symddp_gpt.h).
 *
 * One block per row of (N, Vp) logits. Pass 1: each thread keeps a running
 * (max, sum of exp) over its 8-element vectors (columns [0,V) only); the block
 * combines the pairs in a fixed tree (warp butterfly, then the warps in order),
 * giving lse = max + log(sum). loss = lse - logit[target], the target logit read
 * before any write. Pass 2 (write_grad): logits := (exp(x - lse) - [j == target])
 * * dscale as bf16, 0 for padded columns and ignored rows (target -1). The
 * logits are read twice and never copied to fp32.
 */
#include <math.h>

#include "sd_gpt.cuh"

/* Threads a row. gptcheck times the others at GPT-2's 16384 x 50304 on the
 * H200 (2026-12-02): 256 1230 us, 512 1302 us, 1024 1306 us; more blocks a
 * row's SM runs at once keep more of the rows' loads in flight. */
#define SDG_CLS_THREADS 256

/* gptcheck's switch to time the kernel with other block sizes (0: SDG_CLS_THREADS) */
extern "C" {
int sdg_cls_threads = 0;
}

/* Merges (m2, s2) into (m, s): s sums exp(x - m). */
static __device__ __forceinline__ void sdg_lse_merge(float &m, float &s, float m2, float s2) {
    const float mn = fmaxf(m, m2);
    if (mn == -INFINITY) return; /* both empty */
    s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
    m = mn;
}

template <int THREADS>
__global__ void __launch_bounds__(THREADS)
    sdg_classifier_kernel(float *__restrict__ losses, bf16 *__restrict__ logits, const int32_t *__restrict__ targets,
                          int V, int Vp, float dscale, int write_grad) {
    __shared__ float sm_m[THREADS / 32], sm_s[THREADS / 32];
    __shared__ float sm_lse, sm_tgt;
    const int row = blockIdx.x;
    bf16 *x = logits + (size_t)row * Vp;
    const int tgt = targets[row];
    if (threadIdx.x == 0) sm_tgt = (tgt >= 0 && tgt < V) ? __bfloat162float(x[tgt]) : 0.f;
    const int nv = Vp >> 3;
    float m = -INFINITY, s = 0.f;
    for (int i = threadIdx.x; i < nv; i += THREADS) {
        float f[8];
        sdg_load8(x + 8 * i, f);
        float vm = -INFINITY;
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (8 * i + k < V) vm = fmaxf(vm, f[k]);
        if (vm == -INFINITY) continue; /* all padding */
        const float mn = fmaxf(m, vm);
        float add = 0.f;
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (8 * i + k < V) add += __expf(f[k] - mn);
        s = s * __expf(m - mn) + add; /* m = -inf at first: exp(-inf) = 0 */
        m = mn;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        sdg_lse_merge(m, s, m2, s2);
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) {
        sm_m[warp] = m;
        sm_s[warp] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float bm = sm_m[0], bs = sm_s[0];
        for (int w = 1; w < THREADS / 32; w++) sdg_lse_merge(bm, bs, sm_m[w], sm_s[w]);
        const float lse = bm + logf(bs);
        sm_lse = lse;
        losses[row] = (tgt >= 0 && tgt < V) ? lse - sm_tgt : 0.f;
    }
    __syncthreads();
    if (!write_grad) return;
    const float lse = sm_lse;
    const bool ignore = !(tgt >= 0 && tgt < V);
    for (int i = threadIdx.x; i < nv; i += THREADS) {
        float f[8];
        sdg_load8(x + 8 * i, f);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int j = 8 * i + k;
            float g = 0.f;
            if (!ignore && j < V) g = (__expf(f[k] - lse) - (j == tgt ? 1.f : 0.f)) * dscale;
            f[k] = g;
        }
        sdg_store8(x + 8 * i, f);
    }
}

extern "C" int sdg_classifier(float *losses, void *logits, const int32_t *targets, int N, int V, int Vp, float dscale,
                              int write_grad, void *stream) {
    if (N <= 0 || V <= 0 || Vp < V || Vp % 8 != 0)
        return SDG_FAIL(SDG_ERR_ARG, "sdg_classifier: N=%d V=%d Vp=%d (Vp >= V, a multiple of 8)", N, V, Vp);
    if (!losses || !logits || !targets || !sdg_aligned16(logits))
        return SDG_FAIL(SDG_ERR_ARG, "sdg_classifier: NULL or unaligned pointer");
    cudaStream_t s = (cudaStream_t)stream;
    bf16 *x = (bf16 *)logits;
    switch (sdg_cls_threads ? sdg_cls_threads : SDG_CLS_THREADS) {
    case 512: sdg_classifier_kernel<512><<<N, 512, 0, s>>>(losses, x, targets, V, Vp, dscale, write_grad); break;
    case 1024: sdg_classifier_kernel<1024><<<N, 1024, 0, s>>>(losses, x, targets, V, Vp, dscale, write_grad); break;
    default: sdg_classifier_kernel<256><<<N, 256, 0, s>>>(losses, x, targets, V, Vp, dscale, write_grad);
    }
    SDG_LAUNCHED();
    return SDG_OK;
}

#define SDG_STATS_THREADS 1024

/* One block: thread i sums rows i, i + 1024, ... in double, then a fixed tree. */
__global__ void __launch_bounds__(SDG_STATS_THREADS)
    sdg_loss_stats_kernel(float *__restrict__ stats, const float *__restrict__ losses,
                          const int32_t *__restrict__ targets, int N) {
    __shared__ double sm_l[SDG_STATS_THREADS], sm_c[SDG_STATS_THREADS];
    double l = 0, c = 0;
    for (int i = threadIdx.x; i < N; i += SDG_STATS_THREADS) {
        l += (double)losses[i];
        c += targets[i] != -1 ? 1.0 : 0.0;
    }
    sm_l[threadIdx.x] = l;
    sm_c[threadIdx.x] = c;
    __syncthreads();
    for (int h = SDG_STATS_THREADS / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) {
            sm_l[threadIdx.x] += sm_l[threadIdx.x + h];
            sm_c[threadIdx.x] += sm_c[threadIdx.x + h];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        stats[0] += (float)sm_l[0];
        stats[2] += (float)sm_c[0];
    }
}

extern "C" int sdg_loss_stats(float *stats, const float *losses, const int32_t *targets, int N, void *stream) {
    if (N <= 0) return SDG_FAIL(SDG_ERR_ARG, "sdg_loss_stats: N=%d", N);
    if (!stats || !losses || !targets) return SDG_FAIL(SDG_ERR_ARG, "sdg_loss_stats: NULL pointer");
    sdg_loss_stats_kernel<<<1, SDG_STATS_THREADS, 0, (cudaStream_t)stream>>>(stats, losses, targets, N);
    SDG_LAUNCHED();
    return SDG_OK;
}
