/*
 * sd_gpt_layernorm.cu: LayerNorm over the channels of each row, bf16
 * activations, fp32 statistics and parameter gradients (symddp_gpt.h).
 *
 * forward: one warp per row; inp (N,C) -> out (N,C), mean and rstd (N) saved.
 *   out = (x - mean) * rstd * w + b, rstd = 1/sqrt(var + 1e-5), var the
 *   biased variance (two passes over the row: mean, then squared deviations).
 * backward: one warp per row again; with xhat = (x - mean) * rstd and
 *   g = dout * w: dx = (g - mean(g) - xhat * mean(g * xhat)) * rstd, added to
 *   dinp. dw = sum over rows of dout * xhat, db = sum of dout: each warp sums its
 *   rows (row = block*W + warp, stepping by grid*W) in its own shared-memory row,
 *   the block adds its W rows in warp order into one partial per block, and a
 *   second kernel adds the partials into dw and db: each of its blocks takes 32
 *   columns, its 32 warps sum every 32nd partial in block order, and the 32
 *   sums are added in warp order. The grids depend only on N and C, so the order
 *   of every addition is fixed.
 *   A warp's shared row keeps channel 8i+k at k*(C/8)+i, so that the 32 lanes
 *   (consecutive i) touch 32 consecutive words: no bank conflicts.
 * The forward of rows of up to SDG_LN_REG_MAX*256 channels (1024: GPT-2 small
 * to large) takes its register form: a lane keeps its vectors of the row in
 * registers from one load instead of reading the row again for each of the
 * three passes. It adds in the generic form's order, so it gives the same
 * bits (gptcheck compares the two): 15.4 against 19.4 us at 16384 x 768 on the
 * H200 (2026-12-02). The backward has one form: with x, dy and the
 * residual gradient in registers as floats it took 51.9 us against the
 * generic 49.2 (130 registers a thread, half the blocks per SM), and with
 * them packed as bf16 in 64 registers 43.4 us against 43.6 (2026-12-02, both
 * with the reduction below).
 */
#include "sd_gpt.cuh"

#define SDG_LN_WARPS 4                 /* warps per block, forward and backward */
#define SDG_LN_MAX_BLOCKS 1024         /* partials of the backward */
#define SDG_LN_EPS 1e-5f
#define SDG_LN_REG_MAX 4               /* vectors of 8 a lane keeps in registers: C <= 32*8*4 */

/* gptcheck's switch to the forward's generic form, to compare bits with it */
extern "C" {
int sdg_ln_force_generic = 0;
}

/*
 * The forward takes K, the vectors of 8 channels a lane keeps in registers:
 * K > 0 holds the lane's vectors i = lane + 32j (j < K) from one load; K = 0
 * (the generic form, any C) loads a vector again in every pass. sdg_ln_each
 * hands fn each of the lane's vectors in the order i = lane, lane + 32, ...
 * either way, so both forms add in the same order.
 */
#define SDG_LN_REGS(K) ((K) > 0 ? (K) : 1)

template <int K, class F>
static __device__ __forceinline__ void sdg_ln_each(const bf16 *__restrict__ x, float (&f)[SDG_LN_REGS(K)][8], int nv,
                                                   F fn) {
    const int lane = threadIdx.x & 31;
    if constexpr (K > 0) {
#pragma unroll
        for (int j = 0; j < K; j++)
            if (lane + 32 * j < nv) fn(lane + 32 * j, f[j]);
    } else {
        for (int i = lane; i < nv; i += 32) {
            float g[8];
            sdg_load8(x + 8 * i, g);
            fn(i, g);
        }
    }
}

/* The lane's K vectors of the row at x into f (nothing when K = 0). */
template <int K>
static __device__ __forceinline__ void sdg_ln_load(const bf16 *__restrict__ x, float (&f)[SDG_LN_REGS(K)][8], int nv) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < K; j++)
        if (lane + 32 * j < nv) sdg_load8(x + 8 * (lane + 32 * j), f[j]);
}

template <int K>
__global__ void __launch_bounds__(SDG_LN_WARPS * 32)
    sdg_ln_fwd_kernel(bf16 *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd,
                      const bf16 *__restrict__ inp, const bf16 *__restrict__ w, const bf16 *__restrict__ b, int N,
                      int C) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * SDG_LN_WARPS + (threadIdx.x >> 5);
    if (row >= N) return;
    const bf16 *x = inp + (size_t)row * C;
    const int nv = C >> 3;
    float f[SDG_LN_REGS(K)][8];
    sdg_ln_load<K>(x, f, nv);
    float s = 0.f;
    sdg_ln_each<K>(x, f, nv, [&](int, const float(&v)[8]) {
#pragma unroll
        for (int k = 0; k < 8; k++) s += v[k];
    });
    const float mu = sdg_warp_sum(s) / (float)C;
    float q = 0.f;
    sdg_ln_each<K>(x, f, nv, [&](int, const float(&v)[8]) {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float d = v[k] - mu;
            q += d * d;
        }
    });
    const float rs = rsqrtf(sdg_warp_sum(q) / (float)C + SDG_LN_EPS);
    bf16 *y = out + (size_t)row * C;
    sdg_ln_each<K>(x, f, nv, [&](int i, const float(&v)[8]) {
        float wf[8], bf[8], o[8];
        sdg_load8(w + 8 * i, wf);
        sdg_load8(b + 8 * i, bf);
#pragma unroll
        for (int k = 0; k < 8; k++) o[k] = (v[k] - mu) * rs * wf[k] + bf[k];
        sdg_store8(y + 8 * i, o);
    });
    if (lane == 0) {
        if (mean) mean[row] = mu;
        if (rstd) rstd[row] = rs;
    }
}

/* partial: [gridDim.x][2C], dw sums then db sums of the block's rows. */
__global__ void __launch_bounds__(SDG_LN_WARPS * 32)
    sdg_ln_bwd_kernel(bf16 *__restrict__ dinp, float *__restrict__ partial, const bf16 *__restrict__ dout,
                      const bf16 *__restrict__ inp, const bf16 *__restrict__ w, const float *__restrict__ mean,
                      const float *__restrict__ rstd, int N, int C) {
    extern __shared__ float sdg_ln_smem[]; /* [SDG_LN_WARPS][2C] */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *acc = sdg_ln_smem + (size_t)warp * 2 * C;
    for (int c = lane; c < 2 * C; c += 32) acc[c] = 0.f;
    __syncwarp();
    const int nv = C >> 3;
    for (int row = blockIdx.x * SDG_LN_WARPS + warp; row < N; row += gridDim.x * SDG_LN_WARPS) {
        const bf16 *x = inp + (size_t)row * C;
        const bf16 *dy = dout + (size_t)row * C;
        bf16 *dx = dinp + (size_t)row * C;
        const float mu = mean[row], rs = rstd[row];
        float sg = 0.f, sgx = 0.f;
        for (int i = lane; i < nv; i += 32) {
            float xf[8], df[8], wf[8];
            sdg_load8(x + 8 * i, xf);
            sdg_load8(dy + 8 * i, df);
            sdg_load8(w + 8 * i, wf);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const float g = df[k] * wf[k];
                sg += g;
                sgx += g * (xf[k] - mu) * rs;
            }
        }
        sg = sdg_warp_sum(sg) / (float)C;
        sgx = sdg_warp_sum(sgx) / (float)C;
        for (int i = lane; i < nv; i += 32) {
            float xf[8], df[8], wf[8], r[8];
            sdg_load8(x + 8 * i, xf);
            sdg_load8(dy + 8 * i, df);
            sdg_load8(w + 8 * i, wf);
            sdg_load8(dx + 8 * i, r);
            float *aw = acc + i;
            float *ab = acc + C + i;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const float xh = (xf[k] - mu) * rs;
                const float g = df[k] * wf[k];
                r[k] += (g - sg - xh * sgx) * rs;
                aw[k * nv] += df[k] * xh;
                ab[k * nv] += df[k];
            }
            sdg_store8(dx + 8 * i, r);
        }
    }
    __syncthreads();
    float *part = partial + (size_t)blockIdx.x * 2 * C;
    for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) {
        /* c is channel (c mod C) of dw (c < C) or db; its word in a row */
        const int ch = c < C ? c : c - C;
        const int at = (c < C ? 0 : C) + (ch & 7) * nv + (ch >> 3);
        float s = 0.f;
#pragma unroll
        for (int k = 0; k < SDG_LN_WARPS; k++) s += sdg_ln_smem[(size_t)k * 2 * C + at];
        part[c] = s;
    }
}

#define SDG_LN_RED_WARPS 32
#define SDG_LN_RED_BATCH 8

/* grid (2C+31)/32, 32 x SDG_LN_RED_WARPS threads: column blockIdx.x*32 + lane.
 * Warp w adds partials w, w + W, w + 2W, ... in that order, loading
 * SDG_LN_RED_BATCH of them before adding them (the partials are in L2: with
 * one load in flight per add, 8 warps took a latency per partial each). */
__global__ void __launch_bounds__(32 * SDG_LN_RED_WARPS)
    sdg_ln_bwd_reduce_kernel(float *__restrict__ dw, float *__restrict__ db, const float *__restrict__ partial, int G,
                             int C) {
    __shared__ float sums[SDG_LN_RED_WARPS][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int c = blockIdx.x * 32 + lane;
    float s = 0.f;
    if (c < 2 * C) {
        const float *p = partial + c;
        const size_t step = (size_t)SDG_LN_RED_WARPS * 2 * C;
        int g = warp;
        for (; g + (SDG_LN_RED_BATCH - 1) * SDG_LN_RED_WARPS < G; g += SDG_LN_RED_BATCH * SDG_LN_RED_WARPS) {
            float v[SDG_LN_RED_BATCH];
#pragma unroll
            for (int u = 0; u < SDG_LN_RED_BATCH; u++) v[u] = p[(size_t)g * 2 * C + u * step];
#pragma unroll
            for (int u = 0; u < SDG_LN_RED_BATCH; u++) s += v[u];
        }
        for (; g < G; g += SDG_LN_RED_WARPS) s += p[(size_t)g * 2 * C];
    }
    sums[warp][lane] = s;
    __syncthreads();
    if (warp != 0 || c >= 2 * C) return;
    float t = 0.f;
#pragma unroll
    for (int k = 0; k < SDG_LN_RED_WARPS; k++) t += sums[k][lane];
    if (c < C)
        dw[c] += t;
    else
        db[c - C] += t;
}

/* K of the forward's register form for rows of C channels (C/8 vectors over
 * 32 lanes), 0 when the row is too long for it. */
static int sdg_ln_reg_vectors(int C) {
    const int k = (C / 8 + 31) / 32;
    return k <= SDG_LN_REG_MAX ? k : 0;
}

static int sdg_ln_blocks(int N) {
    const int g = (N + SDG_LN_WARPS - 1) / SDG_LN_WARPS;
    return g < SDG_LN_MAX_BLOCKS ? g : SDG_LN_MAX_BLOCKS;
}

static int sdg_ln_check(const char *what, int N, int C, const void *a, const void *b, const void *c) {
    if (N <= 0 || C <= 0 || C % 8 != 0)
        return SDG_FAIL(SDG_ERR_ARG, "%s: N=%d C=%d (C must be a positive multiple of 8)", what, N, C);
    if (!a || !b || !c || !sdg_aligned16(a) || !sdg_aligned16(b) || !sdg_aligned16(c))
        return SDG_FAIL(SDG_ERR_ARG, "%s: NULL or not 16-byte aligned bf16 pointer", what);
    return SDG_OK;
}

extern "C" int sdg_layernorm_forward(void *out, float *mean, float *rstd, const void *inp, const void *weight,
                                     const void *bias, int N, int C, void *stream) {
    int rc = sdg_ln_check("sdg_layernorm_forward", N, C, out, inp, weight);
    if (rc != SDG_OK) return rc;
    if (!bias || !sdg_aligned16(bias)) return SDG_FAIL(SDG_ERR_ARG, "sdg_layernorm_forward: bias NULL or unaligned");
    const int blocks = (N + SDG_LN_WARPS - 1) / SDG_LN_WARPS;
    cudaStream_t s = (cudaStream_t)stream;
    bf16 *o = (bf16 *)out;
    const bf16 *x = (const bf16 *)inp, *w = (const bf16 *)weight, *b = (const bf16 *)bias;
    switch (sdg_ln_force_generic ? 0 : sdg_ln_reg_vectors(C)) {
    case 1: sdg_ln_fwd_kernel<1><<<blocks, SDG_LN_WARPS * 32, 0, s>>>(o, mean, rstd, x, w, b, N, C); break;
    case 2: sdg_ln_fwd_kernel<2><<<blocks, SDG_LN_WARPS * 32, 0, s>>>(o, mean, rstd, x, w, b, N, C); break;
    case 3: sdg_ln_fwd_kernel<3><<<blocks, SDG_LN_WARPS * 32, 0, s>>>(o, mean, rstd, x, w, b, N, C); break;
    case 4: sdg_ln_fwd_kernel<4><<<blocks, SDG_LN_WARPS * 32, 0, s>>>(o, mean, rstd, x, w, b, N, C); break;
    default: sdg_ln_fwd_kernel<0><<<blocks, SDG_LN_WARPS * 32, 0, s>>>(o, mean, rstd, x, w, b, N, C);
    }
    SDG_LAUNCHED();
    return SDG_OK;
}

extern "C" size_t sdg_layernorm_backward_scratch_bytes(int N, int C) {
    if (N <= 0 || C <= 0) return 0;
    return (size_t)sdg_ln_blocks(N) * 2 * (size_t)C * sizeof(float);
}

extern "C" int sdg_layernorm_backward(void *dinp, float *dweight, float *dbias, const void *dout, const void *inp,
                                      const void *weight, const float *mean, const float *rstd, int N, int C,
                                      void *scratch, void *stream) {
    int rc = sdg_ln_check("sdg_layernorm_backward", N, C, dinp, dout, inp);
    if (rc != SDG_OK) return rc;
    if (!weight || !sdg_aligned16(weight) || !dweight || !dbias || !mean || !rstd || !scratch)
        return SDG_FAIL(SDG_ERR_ARG, "sdg_layernorm_backward: NULL or unaligned argument");
    const int G = sdg_ln_blocks(N);
    const size_t smem = (size_t)SDG_LN_WARPS * 2 * (size_t)C * sizeof(float);
    if (smem > 48 * 1024) {
        if (smem > 200 * 1024) return SDG_FAIL(SDG_ERR_ARG, "sdg_layernorm_backward: C=%d too large", C);
        SDG_CUDA(cudaFuncSetAttribute(sdg_ln_bwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    }
    cudaStream_t s = (cudaStream_t)stream;
    sdg_ln_bwd_kernel<<<G, SDG_LN_WARPS * 32, smem, s>>>((bf16 *)dinp, (float *)scratch, (const bf16 *)dout,
                                                         (const bf16 *)inp, (const bf16 *)weight, mean, rstd, N, C);
    SDG_LAUNCHED();
    sdg_ln_bwd_reduce_kernel<<<(2 * C + 31) / 32, 32 * SDG_LN_RED_WARPS, 0, s>>>(dweight, dbias,
                                                                               (const float *)scratch, G, C);
    SDG_LAUNCHED();
    return SDG_OK;
}
