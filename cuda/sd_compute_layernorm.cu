/*
 * sd_compute_layernorm.cu: layer normalisation over float32 rows
 * (compute.Norms), forward and backward, with the CPU engine's bits.
 *
 * A row goes to eight lanes of a warp (sd_compute.cuh), which do
 * internal/hostloops' goLayerNorm and goLayerNormBackward in their
 * order: lane a sums the elements a, a+8, ... of the row's leading multiple
 * of eight, the eight partials are added as ((0+1)+(2+3))+((4+5)+(6+7)), and
 * the elements past the multiple of eight are added one by one after them
 * (sum8). The tail is at most seven elements: lane a reads tail element a
 * and every lane gets them by shuffle, so each lane reads only its own
 * elements. Every operation is a
 * round-to-nearest intrinsic, so nvcc fuses no multiply and add; the square
 * root and the divisions are IEEE's.
 *
 * The backward's dw and db are sums over the rows: one thread a column adds
 * its rows in row order, as the CPU loop does, so they too are the CPU
 * engine's bits; the loads and products around those chains are spread over
 * the block (sdc_layer_norm_dwdb_kernel).
 *
 * The bf16 kernels (below, "bf16") are other arithmetic: one warp a row,
 * rsqrtf, dx and the fp32 dw, db ADDED to, the parameter gradients summed
 * through per-block partials in the scratch. sdc_layer_norm and
 * sdc_layer_norm_backward pick the kernels by dtype.
 */
#include "sd_bf16.cuh"
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

/* ---- the fp32 kernels (cuda/localcheck/layernorm_f32_sim.cpp runs them on the CPU) ---- */

#define SDC_LN_THREADS 256   /* 32 rows a block, eight lanes a row */

/* y, mean, rstd of rows rows of cols: goLayerNorm's operations in its order. */
__global__ void __launch_bounds__(SDC_LN_THREADS)
    sdc_layer_norm_kernel(float *__restrict__ y, float *__restrict__ mean, float *__restrict__ rstd,
                          const float *__restrict__ x, const float *__restrict__ w, const float *__restrict__ b,
                          int64_t rows, int64_t cols, float eps) {
    const int lane = threadIdx.x & 7;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
    const bool ok = row < rows; /* the lanes of a row past the end still shuffle */
    const float *xr = x + (ok ? row : 0) * cols;
    const int64_t lead = cols & ~(int64_t)7;
    const float fc = (float)cols;

    /* m = sum8(x) / c */
    float a = 0.0f;
    if (ok)
        for (int64_t j = lane; j < lead; j += 8) a = __fadd_rn(a, xr[j]);
    /* the tail (fewer than eight elements): lane a reads element lead+a */
    const int nt = ok ? (int)(cols - lead) : 0;
    float tails[8];
    sdc_lanes8(lane < nt ? xr[lead + lane] : 0.0f, tails);
    float s = sdc_sum8(a);
    for (int i = 0; i < nt; i++) s = __fadd_rn(s, tails[i]);
    const float m = __fdiv_rn(s, fc);

    /* the variance: sum8 of (x - m)^2, each square rounded */
    a = 0.0f;
    if (ok)
        for (int64_t j = lane; j < lead; j += 8) {
            const float d = __fsub_rn(xr[j], m);
            a = __fadd_rn(a, __fmul_rn(d, d));
        }
    s = sdc_sum8(a);
    for (int i = 0; i < nt; i++) {
        const float d = __fsub_rn(tails[i], m);
        s = __fadd_rn(s, __fmul_rn(d, d));
    }
    /* rstd32: 1 / sqrt(v + eps), the square root correctly rounded */
    const float rs = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(s, fc), eps)));
    if (!ok) return;

    float *yr = y + row * cols;
    for (int64_t j = lane; j < cols; j += 8) {
        const float n = __fmul_rn(__fsub_rn(xr[j], m), rs);
        yr[j] = __fadd_rn(__fmul_rn(n, w[j]), b[j]);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = rs;
    }
}

/*
 * dx of rows rows: goLayerNormBackward's two row sums (of g = w*dy and of
 * g*n) in sum8's order, then gx = ((g - mean g) - n * mean gn) * r, written
 * or added.
 */
__global__ void __launch_bounds__(SDC_LN_THREADS)
    sdc_layer_norm_dx_kernel(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ x,
                             const float *__restrict__ w, const float *__restrict__ mean,
                             const float *__restrict__ rstd, int64_t rows, int64_t cols, int add_dx) {
    const int lane = threadIdx.x & 7;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
    const bool ok = row < rows;
    const int64_t r = ok ? row : 0;
    const float *xr = x + r * cols, *dyr = dy + r * cols;
    const float m = mean[r], rs = rstd[r];
    const int64_t lead = cols & ~(int64_t)7;
    const float fc = (float)cols;

    float sa = 0.0f, sb = 0.0f;
    if (ok)
        for (int64_t j = lane; j < lead; j += 8) {
            const float g = __fmul_rn(w[j], dyr[j]);
            sa = __fadd_rn(sa, g);
            sb = __fadd_rn(sb, __fmul_rn(g, __fmul_rn(__fsub_rn(xr[j], m), rs)));
        }
    /* the tail's g and g*n, lane a computing element lead+a */
    const int nt = ok ? (int)(cols - lead) : 0;
    float tg = 0.0f, tgn = 0.0f;
    if (lane < nt) {
        tg = __fmul_rn(w[lead + lane], dyr[lead + lane]);
        tgn = __fmul_rn(tg, __fmul_rn(__fsub_rn(xr[lead + lane], m), rs));
    }
    float tgs[8], tgns[8];
    sdc_lanes8(tg, tgs);
    sdc_lanes8(tgn, tgns);
    float sg = sdc_sum8(sa), sgn = sdc_sum8(sb);
    for (int i = 0; i < nt; i++) {
        sg = __fadd_rn(sg, tgs[i]);
        sgn = __fadd_rn(sgn, tgns[i]);
    }
    if (!ok) return;
    const float mg = __fdiv_rn(sg, fc), mgn = __fdiv_rn(sgn, fc);
    float *dxr = dx + row * cols;
    for (int64_t j = lane; j < cols; j += 8) {
        const float n = __fmul_rn(__fsub_rn(xr[j], m), rs);
        const float g = __fmul_rn(w[j], dyr[j]);
        const float gx = __fmul_rn(__fsub_rn(__fsub_rn(g, mg), __fmul_rn(n, mgn)), rs);
        dxr[j] = add_dx ? __fadd_rn(dxr[j], gx) : gx;
    }
}

/*
 * dw, db (cols) = sums over the rows of dy*n and dy, from 0, in row order.
 *
 * The order of the adds is the CPU's, so each column's two sums are chains
 * of rows dependent adds; what can run in parallel is everything else. A
 * block takes SDC_LN_DW_COLS columns: its threads read tiles of
 * SDC_LN_DW_ROWS rows (every thread SDC_LN_DW_PER elements of one column),
 * form dy and n*dy (the products rounded as the CPU rounds them) into a
 * shared-memory tile, and one thread per column adds the tile's rows in order
 * while the loads of the next tile are in flight. The adding threads are a
 * warp of their own (the block's first; lanes past SDC_LN_DW_COLS idle)
 * that loads nothing, so that no load of the next tile waits behind this
 * tile's adds: with the adders in a loading warp it took 73 us at 8192 x 768
 * on an H100 (2026-12-06), where the chains alone take about 18. One thread a
 * column reading the rows itself, the loop before those, waited on a DRAM
 * load every few adds: 598 us.
 */
#define SDC_LN_DW_COLS 8                                            /* columns a block */
#define SDC_LN_DW_LOADERS 256                                       /* threads that load: warps 1.. */
#define SDC_LN_DW_THREADS (32 + SDC_LN_DW_LOADERS)                  /* threads a block: the adders' warp first */
#define SDC_LN_DW_ROWS_PASS (SDC_LN_DW_LOADERS / SDC_LN_DW_COLS)    /* rows one pass of the loaders reads: 32 */
#define SDC_LN_DW_PER 8                                             /* passes a tile */
#define SDC_LN_DW_ROWS (SDC_LN_DW_ROWS_PASS * SDC_LN_DW_PER)        /* rows a tile: 256 */

__global__ void __launch_bounds__(SDC_LN_DW_THREADS)
    sdc_layer_norm_dwdb_kernel(float *__restrict__ dw, float *__restrict__ db, const float *__restrict__ dy,
                               const float *__restrict__ x, const float *__restrict__ mean,
                               const float *__restrict__ rstd, int64_t rows, int64_t cols) {
    __shared__ float sd[2][SDC_LN_DW_ROWS][SDC_LN_DW_COLS];
    __shared__ float snd[2][SDC_LN_DW_ROWS][SDC_LN_DW_COLS];
    const bool adder = threadIdx.x < 32;
    const int lt = adder ? 0 : (int)threadIdx.x - 32; /* a loader's index */
    const int c = lt % SDC_LN_DW_COLS, rr = lt / SDC_LN_DW_COLS;
    const int64_t j = (int64_t)blockIdx.x * SDC_LN_DW_COLS + c;
    const bool col_ok = j < cols;
    const int64_t tiles = (rows + SDC_LN_DW_ROWS - 1) / SDC_LN_DW_ROWS;
    float vd[SDC_LN_DW_PER], vx[SDC_LN_DW_PER], vm[SDC_LN_DW_PER], vr[SDC_LN_DW_PER];

    /* load: tile t's elements of this loader into registers (0 past the ends) */
    auto load = [&](int64_t t) {
#pragma unroll
        for (int k = 0; k < SDC_LN_DW_PER; k++) {
            const int64_t r = t * SDC_LN_DW_ROWS + k * SDC_LN_DW_ROWS_PASS + rr;
            const bool ok = col_ok && r < rows;
            vd[k] = ok ? dy[r * cols + j] : 0.0f;
            vx[k] = ok ? x[r * cols + j] : 0.0f;
            vm[k] = ok ? mean[r] : 0.0f;
            vr[k] = ok ? rstd[r] : 0.0f;
        }
    };
    /* store: the loaded elements' dy and n*dy into buffer b */
    auto store = [&](int b) {
#pragma unroll
        for (int k = 0; k < SDC_LN_DW_PER; k++) {
            const float n = __fmul_rn(__fsub_rn(vx[k], vm[k]), vr[k]);
            sd[b][k * SDC_LN_DW_ROWS_PASS + rr][c] = vd[k];
            snd[b][k * SDC_LN_DW_ROWS_PASS + rr][c] = __fmul_rn(n, vd[k]);
        }
    };

    float sw = 0.0f, sb = 0.0f;
    if (!adder) {
        load(0);
        store(0);
    }
    __syncthreads();
    for (int64_t t = 0; t < tiles; t++) {
        const int b = (int)(t & 1);
        if (adder) {
            if (threadIdx.x < SDC_LN_DW_COLS) {
                const int64_t left = rows - t * SDC_LN_DW_ROWS;
                const int n = left < SDC_LN_DW_ROWS ? (int)left : SDC_LN_DW_ROWS;
                const int col = threadIdx.x;
#pragma unroll 16
                for (int i = 0; i < n; i++) {
                    sb = __fadd_rn(sb, sd[b][i][col]);
                    sw = __fadd_rn(sw, snd[b][i][col]);
                }
            }
        } else if (t + 1 < tiles) {
            load(t + 1);
            store(b ^ 1); /* the other buffer: last read two tiles ago, before the sync below */
        }
        __syncthreads();
    }
    const int64_t jc = (int64_t)blockIdx.x * SDC_LN_DW_COLS + threadIdx.x;
    if (threadIdx.x < SDC_LN_DW_COLS && jc < cols) {
        dw[jc] = sw;
        db[jc] = sb;
    }
}

/* ---- bf16 ---- */

/*
 * The bf16 kernels: LayerNorm over the channels of each row, bf16
 * activations, fp32 statistics and parameter gradients.
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
 * The forward of rows of up to SDC_LNB_REG_MAX*256 channels (1024: GPT-2 small
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

#define SDC_LNB_WARPS 4                 /* warps per block, forward and backward */
#define SDC_LNB_MAX_BLOCKS 1024         /* partials of the backward */
#define SDC_LNB_EPS 1e-5f
#define SDC_LNB_REG_MAX 4               /* vectors of 8 a lane keeps in registers: C <= 32*8*4 */

/* gptcheck's switch to the forward's generic form, to compare bits with it */
extern "C" {
int sdc_lnb_force_generic = 0;
}

/*
 * The forward takes K, the vectors of 8 channels a lane keeps in registers:
 * K > 0 holds the lane's vectors i = lane + 32j (j < K) from one load; K = 0
 * (the generic form, any C) loads a vector again in every pass. sdc_lnb_each
 * hands fn each of the lane's vectors in the order i = lane, lane + 32, ...
 * either way, so both forms add in the same order.
 */
#define SDC_LNB_REGS(K) ((K) > 0 ? (K) : 1)

template <int K, class F>
static __device__ __forceinline__ void sdc_lnb_each(const bf16 *__restrict__ x, float (&f)[SDC_LNB_REGS(K)][8], int nv,
                                                   F fn) {
    const int lane = threadIdx.x & 31;
    if constexpr (K > 0) {
#pragma unroll
        for (int j = 0; j < K; j++)
            if (lane + 32 * j < nv) fn(lane + 32 * j, f[j]);
    } else {
        for (int i = lane; i < nv; i += 32) {
            float g[8];
            sdb_load8(x + 8 * i, g);
            fn(i, g);
        }
    }
}

/* The lane's K vectors of the row at x into f (nothing when K = 0). */
template <int K>
static __device__ __forceinline__ void sdc_lnb_load(const bf16 *__restrict__ x, float (&f)[SDC_LNB_REGS(K)][8], int nv) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < K; j++)
        if (lane + 32 * j < nv) sdb_load8(x + 8 * (lane + 32 * j), f[j]);
}

template <int K>
__global__ void __launch_bounds__(SDC_LNB_WARPS * 32)
    sdc_lnb_fwd_kernel(bf16 *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd,
                      const bf16 *__restrict__ inp, const bf16 *__restrict__ w, const bf16 *__restrict__ b, int N,
                      int C) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * SDC_LNB_WARPS + (threadIdx.x >> 5);
    if (row >= N) return;
    const bf16 *x = inp + (size_t)row * C;
    const int nv = C >> 3;
    float f[SDC_LNB_REGS(K)][8];
    sdc_lnb_load<K>(x, f, nv);
    float s = 0.f;
    sdc_lnb_each<K>(x, f, nv, [&](int, const float(&v)[8]) {
#pragma unroll
        for (int k = 0; k < 8; k++) s += v[k];
    });
    const float mu = sdb_warp_sum(s) / (float)C;
    float q = 0.f;
    sdc_lnb_each<K>(x, f, nv, [&](int, const float(&v)[8]) {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float d = v[k] - mu;
            q += d * d;
        }
    });
    const float rs = rsqrtf(sdb_warp_sum(q) / (float)C + SDC_LNB_EPS);
    bf16 *y = out + (size_t)row * C;
    sdc_lnb_each<K>(x, f, nv, [&](int i, const float(&v)[8]) {
        float wf[8], bf[8], o[8];
        sdb_load8(w + 8 * i, wf);
        sdb_load8(b + 8 * i, bf);
#pragma unroll
        for (int k = 0; k < 8; k++) o[k] = (v[k] - mu) * rs * wf[k] + bf[k];
        sdb_store8(y + 8 * i, o);
    });
    if (lane == 0) {
        if (mean) mean[row] = mu;
        if (rstd) rstd[row] = rs;
    }
}

/* partial: [gridDim.x][2C], dw sums then db sums of the block's rows. */
__global__ void __launch_bounds__(SDC_LNB_WARPS * 32)
    sdc_lnb_bwd_kernel(bf16 *__restrict__ dinp, float *__restrict__ partial, const bf16 *__restrict__ dout,
                      const bf16 *__restrict__ inp, const bf16 *__restrict__ w, const float *__restrict__ mean,
                      const float *__restrict__ rstd, int N, int C) {
    extern __shared__ float sdc_lnb_smem[]; /* [SDC_LNB_WARPS][2C] */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *acc = sdc_lnb_smem + (size_t)warp * 2 * C;
    for (int c = lane; c < 2 * C; c += 32) acc[c] = 0.f;
    __syncwarp();
    const int nv = C >> 3;
    for (int row = blockIdx.x * SDC_LNB_WARPS + warp; row < N; row += gridDim.x * SDC_LNB_WARPS) {
        const bf16 *x = inp + (size_t)row * C;
        const bf16 *dy = dout + (size_t)row * C;
        bf16 *dx = dinp + (size_t)row * C;
        const float mu = mean[row], rs = rstd[row];
        float sg = 0.f, sgx = 0.f;
        for (int i = lane; i < nv; i += 32) {
            float xf[8], df[8], wf[8];
            sdb_load8(x + 8 * i, xf);
            sdb_load8(dy + 8 * i, df);
            sdb_load8(w + 8 * i, wf);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const float g = df[k] * wf[k];
                sg += g;
                sgx += g * (xf[k] - mu) * rs;
            }
        }
        sg = sdb_warp_sum(sg) / (float)C;
        sgx = sdb_warp_sum(sgx) / (float)C;
        for (int i = lane; i < nv; i += 32) {
            float xf[8], df[8], wf[8], r[8];
            sdb_load8(x + 8 * i, xf);
            sdb_load8(dy + 8 * i, df);
            sdb_load8(w + 8 * i, wf);
            sdb_load8(dx + 8 * i, r);
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
            sdb_store8(dx + 8 * i, r);
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
        for (int k = 0; k < SDC_LNB_WARPS; k++) s += sdc_lnb_smem[(size_t)k * 2 * C + at];
        part[c] = s;
    }
}

#define SDC_LNB_RED_WARPS 32
#define SDC_LNB_RED_BATCH 8

/* grid (2C+31)/32, 32 x SDC_LNB_RED_WARPS threads: column blockIdx.x*32 + lane.
 * Warp w adds partials w, w + W, w + 2W, ... in that order, loading
 * SDC_LNB_RED_BATCH of them before adding them (the partials are in L2: with
 * one load in flight per add, 8 warps took a latency per partial each). */
__global__ void __launch_bounds__(32 * SDC_LNB_RED_WARPS)
    sdc_lnb_bwd_reduce_kernel(float *__restrict__ dw, float *__restrict__ db, const float *__restrict__ partial, int G,
                             int C) {
    __shared__ float sums[SDC_LNB_RED_WARPS][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int c = blockIdx.x * 32 + lane;
    float s = 0.f;
    if (c < 2 * C) {
        const float *p = partial + c;
        const size_t step = (size_t)SDC_LNB_RED_WARPS * 2 * C;
        int g = warp;
        for (; g + (SDC_LNB_RED_BATCH - 1) * SDC_LNB_RED_WARPS < G; g += SDC_LNB_RED_BATCH * SDC_LNB_RED_WARPS) {
            float v[SDC_LNB_RED_BATCH];
#pragma unroll
            for (int u = 0; u < SDC_LNB_RED_BATCH; u++) v[u] = p[(size_t)g * 2 * C + u * step];
#pragma unroll
            for (int u = 0; u < SDC_LNB_RED_BATCH; u++) s += v[u];
        }
        for (; g < G; g += SDC_LNB_RED_WARPS) s += p[(size_t)g * 2 * C];
    }
    sums[warp][lane] = s;
    __syncthreads();
    if (warp != 0 || c >= 2 * C) return;
    float t = 0.f;
#pragma unroll
    for (int k = 0; k < SDC_LNB_RED_WARPS; k++) t += sums[k][lane];
    if (c < C)
        dw[c] += t;
    else
        db[c - C] += t;
}

/* K of the forward's register form for rows of C channels (C/8 vectors over
 * 32 lanes), 0 when the row is too long for it. */
static int sdc_lnb_reg_vectors(int C) {
    const int k = (C / 8 + 31) / 32;
    return k <= SDC_LNB_REG_MAX ? k : 0;
}

static int sdc_lnb_blocks(int N) {
    const int g = (N + SDC_LNB_WARPS - 1) / SDC_LNB_WARPS;
    return g < SDC_LNB_MAX_BLOCKS ? g : SDC_LNB_MAX_BLOCKS;
}

static int sdc_lnb_check(const char *what, int64_t N, int64_t C, uint64_t a, uint64_t b, uint64_t c) {
    if (N <= 0 || C <= 0 || C % 8 != 0 || N > 0x7fffffff || C > 0x7fffffff)
        return SD_FAIL(SD_ERR_ARG, "%s: N=%lld C=%lld (C must be a positive multiple of 8)", what, (long long)N,
                       (long long)C);
    if (!a || !b || !c || a % 16 || b % 16 || c % 16)
        return SD_FAIL(SD_ERR_ARG, "%s: NULL or not 16-byte aligned bf16 pointer", what);
    return SD_OK;
}

static int sdc_layer_norm_bf16(cudaStream_t s, uint64_t out, uint64_t mean, uint64_t rstd, uint64_t inp,
                               uint64_t weight, uint64_t bias, int64_t rows, int64_t cols, float eps) {
    int rc = sdc_lnb_check("sdc_layer_norm", rows, cols, out, inp, weight);
    if (rc != SD_OK) return rc;
    if (!bias || bias % 16) return SD_FAIL(SD_ERR_ARG, "sdc_layer_norm: bias NULL or unaligned");
    if (eps != SDC_LNB_EPS) return SD_FAIL(SD_ERR_ARG, "sdc_layer_norm: eps %g, the bf16 kernels' is 1e-5", (double)eps);
    const int N = (int)rows, C = (int)cols;
    const int blocks = (N + SDC_LNB_WARPS - 1) / SDC_LNB_WARPS;
    bf16 *o = (bf16 *)(uintptr_t)out;
    float *m = (float *)(uintptr_t)mean, *r = (float *)(uintptr_t)rstd;
    const bf16 *x = (const bf16 *)(uintptr_t)inp, *w = (const bf16 *)(uintptr_t)weight, *b = (const bf16 *)(uintptr_t)bias;
    switch (sdc_lnb_force_generic ? 0 : sdc_lnb_reg_vectors(C)) {
    case 1: sdc_lnb_fwd_kernel<1><<<blocks, SDC_LNB_WARPS * 32, 0, s>>>(o, m, r, x, w, b, N, C); break;
    case 2: sdc_lnb_fwd_kernel<2><<<blocks, SDC_LNB_WARPS * 32, 0, s>>>(o, m, r, x, w, b, N, C); break;
    case 3: sdc_lnb_fwd_kernel<3><<<blocks, SDC_LNB_WARPS * 32, 0, s>>>(o, m, r, x, w, b, N, C); break;
    case 4: sdc_lnb_fwd_kernel<4><<<blocks, SDC_LNB_WARPS * 32, 0, s>>>(o, m, r, x, w, b, N, C); break;
    default: sdc_lnb_fwd_kernel<0><<<blocks, SDC_LNB_WARPS * 32, 0, s>>>(o, m, r, x, w, b, N, C);
    }
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

static size_t sdc_lnb_scratch_bytes(int64_t N, int64_t C) {
    if (N <= 0 || C <= 0 || N > 0x7fffffff) return 0;
    return (size_t)sdc_lnb_blocks((int)N) * 2 * (size_t)C * sizeof(float);
}

static int sdc_layer_norm_backward_bf16(cudaStream_t s, uint64_t dinp, uint64_t dweight, uint64_t dbias,
                                        uint64_t dout, uint64_t inp, uint64_t weight, uint64_t mean, uint64_t rstd,
                                        int64_t rows, int64_t cols, sdc_flag add_dx, uint64_t scratch) {
    int rc = sdc_lnb_check("sdc_layer_norm_backward", rows, cols, dinp, dout, inp);
    if (rc != SD_OK) return rc;
    if (!weight || weight % 16 || !dweight || !dbias || !mean || !rstd || !scratch)
        return SD_FAIL(SD_ERR_ARG, "sdc_layer_norm_backward: NULL or unaligned argument");
    if (!add_dx) return SD_FAIL(SD_ERR_ARG, "sdc_layer_norm_backward: the bf16 kernel adds to dx (add_dx = 1)");
    const int N = (int)rows, C = (int)cols;
    const int G = sdc_lnb_blocks(N);
    const size_t smem = (size_t)SDC_LNB_WARPS * 2 * (size_t)C * sizeof(float);
    if (smem > 48 * 1024) {
        if (smem > 200 * 1024) return SD_FAIL(SD_ERR_ARG, "sdc_layer_norm_backward: C=%d too large", C);
        SD_CUDA(cudaFuncSetAttribute(sdc_lnb_bwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    }
    sdc_lnb_bwd_kernel<<<G, SDC_LNB_WARPS * 32, smem, s>>>(
        (bf16 *)(uintptr_t)dinp, (float *)(uintptr_t)scratch, (const bf16 *)(uintptr_t)dout,
        (const bf16 *)(uintptr_t)inp, (const bf16 *)(uintptr_t)weight, (const float *)(uintptr_t)mean,
        (const float *)(uintptr_t)rstd, N, C);
    SD_CUDA(cudaGetLastError());
    sdc_lnb_bwd_reduce_kernel<<<(2 * C + 31) / 32, 32 * SDC_LNB_RED_WARPS, 0, s>>>(
        (float *)(uintptr_t)dweight, (float *)(uintptr_t)dbias, (const float *)(uintptr_t)scratch, G, C);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/* ---- launchers ---- */

static int64_t sdc_ln_blocks(int64_t rows) { return (rows + SDC_LN_THREADS / 8 - 1) / (SDC_LN_THREADS / 8); }

/* rows and cols that the kernels' grids and indices take. */
static bool sdc_ln_dims(int64_t rows, int64_t cols) {
    return rows > 0 && cols > 0 && sdc_ln_blocks(rows) <= 0x7fffffff && rows <= INT64_MAX / cols &&
           (cols + SDC_LN_DW_COLS - 1) / SDC_LN_DW_COLS <= 0x7fffffff;
}

extern "C" int sdc_layer_norm(const sdc_ctx *c, sdc_dtype dtype, uint64_t y, uint64_t mean, uint64_t rstd,
                              uint64_t x, uint64_t w, uint64_t b, int64_t rows, int64_t cols, float eps) {
    if (c && dtype == SDC_BF16) {
        SD_TRY(sdc_use_device(c->device));
        return sdc_layer_norm_bf16((cudaStream_t)(uintptr_t)c->stream, y, mean, rstd, x, w, b, rows, cols, eps);
    }
    if (!c || dtype != SDC_F32 || !sdc_ln_dims(rows, cols) || !y || !mean || !rstd || !x || !w || !b)
        return SD_FAIL(SD_ERR_ARG, "sdc_layer_norm: bad arguments (%lld rows of %lld)", (long long)rows,
                       (long long)cols);
    SD_TRY(sdc_use_device(c->device));
    sdc_layer_norm_kernel<<<(unsigned)sdc_ln_blocks(rows), SDC_LN_THREADS, 0, (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)y, (float *)(uintptr_t)mean, (float *)(uintptr_t)rstd, (const float *)(uintptr_t)x,
        (const float *)(uintptr_t)w, (const float *)(uintptr_t)b, rows, cols, eps);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_layer_norm_backward_scratch_bytes(sdc_dtype dtype, int64_t rows, int64_t cols, int64_t *bytes) {
    if (!bytes || (dtype != SDC_F32 && dtype != SDC_BF16))
        return SD_FAIL(SD_ERR_ARG, "sdc_layer_norm_backward_scratch_bytes: bad arguments");
    *bytes = dtype == SDC_BF16 ? (int64_t)sdc_lnb_scratch_bytes(rows, cols) : 0;
    return SD_OK;
}

extern "C" int sdc_layer_norm_backward(const sdc_ctx *c, sdc_dtype dtype, uint64_t dx, uint64_t dw, uint64_t db,
                                       uint64_t dy, uint64_t x, uint64_t w, uint64_t mean, uint64_t rstd,
                                       int64_t rows, int64_t cols, sdc_flag add_dx, uint64_t scratch) {
    if (c && dtype == SDC_BF16) {
        SD_TRY(sdc_use_device(c->device));
        return sdc_layer_norm_backward_bf16((cudaStream_t)(uintptr_t)c->stream, dx, dw, db, dy, x, w, mean, rstd,
                                            rows, cols, add_dx, scratch);
    }
    (void)scratch;
    if (!c || dtype != SDC_F32 || !sdc_ln_dims(rows, cols) || !dx || !dw || !db || !dy || !x || !w || !mean || !rstd)
        return SD_FAIL(SD_ERR_ARG, "sdc_layer_norm_backward: bad arguments (%lld rows of %lld)", (long long)rows,
                       (long long)cols);
    SD_TRY(sdc_use_device(c->device));
    const cudaStream_t st = (cudaStream_t)(uintptr_t)c->stream;
    sdc_layer_norm_dx_kernel<<<(unsigned)sdc_ln_blocks(rows), SDC_LN_THREADS, 0, st>>>(
        (float *)(uintptr_t)dx, (const float *)(uintptr_t)dy, (const float *)(uintptr_t)x,
        (const float *)(uintptr_t)w, (const float *)(uintptr_t)mean, (const float *)(uintptr_t)rstd, rows, cols,
        add_dx ? 1 : 0);
    SD_CUDA(cudaGetLastError());
    const int64_t col_blocks = (cols + SDC_LN_DW_COLS - 1) / SDC_LN_DW_COLS;
    sdc_layer_norm_dwdb_kernel<<<(unsigned)col_blocks, SDC_LN_DW_THREADS, 0, st>>>(
        (float *)(uintptr_t)dw, (float *)(uintptr_t)db, (const float *)(uintptr_t)dy, (const float *)(uintptr_t)x,
        (const float *)(uintptr_t)mean, (const float *)(uintptr_t)rstd, rows, cols);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
