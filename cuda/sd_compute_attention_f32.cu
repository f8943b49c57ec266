/*
 * sd_compute_attention_f32.cu: the fp32 causal flash attention
 * (sdc_attention_f32, sdc_attention_backward_f32 in symddp_compute.h):
 * SIMT fp32 FMAs, no TF32, the (T,T) scores never in memory.
 *
 * Every kernel works on 64 x 64 tiles in shared memory with 128 threads:
 * thread (tx = tid % 16, ty = tid / 16) holds rows ty + 8r (r < 8) of a
 * 64-row result, at columns tx + 16c (c < 4) of a score tile (af_abt) or
 * 4tx + c of a head-size tile (af_pv). Rows 8 apart keep the broadcast
 * reads of a warp's two ty in different banks; the tiles' row strides
 * (AF_LDT, AF_LDP) keep the other reads and the stores conflict-free. The
 * tiles are zero past T and past the head size, so head sizes below 64 and
 * a partial last tile need no other case; the causal mask and the rows past
 * T are applied to the scores.
 *
 * Forward (af_forward), one block per (sequence, head, 64 queries), the
 * heaviest (last) query tiles first: S = Q K^T tile by tile up to the
 * diagonal, an online softmax in base 2 (scores times scale * log2 e; the
 * row's maximum and sum kept, the sum per thread and added across the 16
 * lanes of a row at the end), O += P V; out = O / sum and
 * lse = (max + log2 sum) * ln 2.
 *
 * Backward, without atomics, so its bits repeat: af_backward_d writes
 * D = rowsum(dO * O) to the scratch; af_backward_dkv, one block per
 * (sequence, key/value head, 64 keys), recomputes P^T = exp2(S^T * scale
 * log2 e - lse log2 e) and dP^T = V dO^T tile by tile over its group's
 * query heads in order and the query tiles from the diagonal on, sums
 * dV = P^T dO and dK = scale dS^T Q with dS = P (dP - D), and writes each
 * dS tile to the scratch; af_backward_dq, one block per (sequence, head,
 * 64 queries), then sums dQ = scale dS K from those tiles, one product a
 * tile (recomputing P and dP there too took 3).
 */
#include <math.h>
#include <stdio.h>

#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

/* ---- the kernels (cuda/localcheck/attention_f32_sim.cpp runs this part on the CPU) ---- */

#define AF_B 64         /* query rows and keys a tile */
#define AF_D 64         /* the largest head size: tiles are zero past HS */
#define AF_THREADS 128  /* 16 x 8 threads, each 8 rows x 4 columns */
#define AF_LDT 68       /* floats between the rows of a Q, K, V or dO tile */
#define AF_LDP 80       /* floats between the rows of a P or dS tile */
#define AF_TILE (AF_B * AF_LDT)
#define AF_PTILE (AF_B * AF_LDP)
#define AF_LOG2E 1.4426950408889634f
#define AF_LN2 0.6931471805599453f

/* Starts filling the tile t (rows LD floats apart) with rows [row0, row0 +
 * 64) of one head (HS columns, rows ld apart from base), zero past T and
 * past HS: by 16-byte asynchronous copies where HS and ld are multiples of
 * 4 and base is 16-byte aligned (GPT-2's and Llama's heads of 64, the dS
 * tiles; the same for every block of a launch), else a float a thread,
 * stored at once. Either way the tile is the block's after sdc_cp_commit,
 * sdc_cp_wait and __syncthreads, and no thread may still read t when it is
 * called. */
template <int LD = AF_LDT>
static __device__ __forceinline__ void af_load(float *__restrict__ t, const float *__restrict__ base, int64_t ld,
                                               int row0, int T, int HS) {
    if ((HS & 3) == 0 && (ld & 3) == 0 && ((uintptr_t)base & 15) == 0) {
#pragma unroll 8
        for (int e = threadIdx.x; e < AF_B * AF_D / 4; e += AF_THREADS) {
            const int r = e >> 4, c = (e & 15) * 4;
            const int row = row0 + r;
            const bool in = row < T && c < HS;
            sdc_cp16_zfill(&t[r * LD + c], in ? &base[(int64_t)row * ld + c] : base, in ? 16 : 0);
        }
        return;
    }
#pragma unroll 8
    for (int e = threadIdx.x; e < AF_B * AF_D; e += AF_THREADS) {
        const int r = e >> 6, c = e & 63;
        const int row = row0 + r;
        t[r * LD + c] = (row < T && c < HS) ? base[(int64_t)row * ld + c] : 0.0f;
    }
}

/* acc[r][c] = sum over the 64 d of a[ty + 8r][d] * b[tx + 16c][d] (tiles of AF_LDT). */
static __device__ __forceinline__ void af_abt(float acc[8][4], const float *__restrict__ a,
                                              const float *__restrict__ b, int tx, int ty) {
#pragma unroll
    for (int r = 0; r < 8; r++)
#pragma unroll
        for (int c = 0; c < 4; c++) acc[r][c] = 0.0f;
#pragma unroll 2
    for (int d = 0; d < AF_D; d += 4) {
        float4 bv[4], av[8];
#pragma unroll
        for (int c = 0; c < 4; c++) bv[c] = *(const float4 *)&b[(tx + 16 * c) * AF_LDT + d];
#pragma unroll
        for (int r = 0; r < 8; r++) av[r] = *(const float4 *)&a[(ty + 8 * r) * AF_LDT + d];
#pragma unroll
        for (int r = 0; r < 8; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                float x = acc[r][c];
                x = fmaf(av[r].x, bv[c].x, x);
                x = fmaf(av[r].y, bv[c].y, x);
                x = fmaf(av[r].z, bv[c].z, x);
                x = fmaf(av[r].w, bv[c].w, x);
                acc[r][c] = x;
            }
    }
}

/* acc[r][c] += sum over the 64 j of p[ty + 8r][j] * m[j][4tx + c] (p of AF_LDP, m of AF_LDT). */
static __device__ __forceinline__ void af_pv(float acc[8][4], const float *__restrict__ p,
                                             const float *__restrict__ m, int tx, int ty) {
#pragma unroll 2
    for (int j = 0; j < AF_B; j += 4) {
        float4 pv[8], mv[4];
#pragma unroll
        for (int u = 0; u < 4; u++) mv[u] = *(const float4 *)&m[(j + u) * AF_LDT + 4 * tx];
#pragma unroll
        for (int r = 0; r < 8; r++) pv[r] = *(const float4 *)&p[(ty + 8 * r) * AF_LDP + j];
#pragma unroll
        for (int r = 0; r < 8; r++) {
            acc[r][0] = fmaf(pv[r].x, mv[0].x, acc[r][0]);
            acc[r][1] = fmaf(pv[r].x, mv[0].y, acc[r][1]);
            acc[r][2] = fmaf(pv[r].x, mv[0].z, acc[r][2]);
            acc[r][3] = fmaf(pv[r].x, mv[0].w, acc[r][3]);
            acc[r][0] = fmaf(pv[r].y, mv[1].x, acc[r][0]);
            acc[r][1] = fmaf(pv[r].y, mv[1].y, acc[r][1]);
            acc[r][2] = fmaf(pv[r].y, mv[1].z, acc[r][2]);
            acc[r][3] = fmaf(pv[r].y, mv[1].w, acc[r][3]);
            acc[r][0] = fmaf(pv[r].z, mv[2].x, acc[r][0]);
            acc[r][1] = fmaf(pv[r].z, mv[2].y, acc[r][1]);
            acc[r][2] = fmaf(pv[r].z, mv[2].z, acc[r][2]);
            acc[r][3] = fmaf(pv[r].z, mv[2].w, acc[r][3]);
            acc[r][0] = fmaf(pv[r].w, mv[3].x, acc[r][0]);
            acc[r][1] = fmaf(pv[r].w, mv[3].y, acc[r][1]);
            acc[r][2] = fmaf(pv[r].w, mv[3].z, acc[r][2]);
            acc[r][3] = fmaf(pv[r].w, mv[3].w, acc[r][3]);
        }
    }
}

/* The 16 lanes of a row (tx) reduced: their maximum, or their sum. */
static __device__ __forceinline__ float af_max16(float x) {
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}
static __device__ __forceinline__ float af_sum16(float x) {
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* Where the operands lie (symddp_compute.h): q, k, v rows ldq / ldkv apart,
 * out, dout and their rows NH*HS apart; grp query heads a key/value head. */
struct af_shape {
    int64_t ldq, ldkv;
    int B, T, NH, KVH, grp, HS, nb; /* nb: 64-row tiles of T */
    float sl2, scale;               /* scale * log2 e; scale = 1/sqrt(HS) */
};

/* Where dS's tile of head bh (= b*NH + h), query tile qt and key tile
 * kt <= qt lies in the backward's scratch dS: 64 x 64 floats, query row i
 * and key j at i*64 + j, the causal tiles of a head in the order (0,0),
 * (1,0), (1,1), (2,0), ... */
static __device__ __forceinline__ float *af_dstile(float *dS, const af_shape &sh, int64_t bh, int qt, int kt) {
    const int64_t ntiles = (int64_t)sh.nb * (sh.nb + 1) / 2;
    return dS + ((bh * ntiles + (int64_t)qt * (qt + 1) / 2 + kt) << 12);
}

__global__ void __launch_bounds__(AF_THREADS)
    af_forward(float *__restrict__ out, float *__restrict__ lse, const float *__restrict__ q,
               const float *__restrict__ k, const float *__restrict__ v, const af_shape sh) {
    extern __shared__ float4 af_smem[];
    float *Qs = (float *)af_smem, *Ks = Qs + AF_TILE, *Vs = Ks + AF_TILE, *Ps = Vs + AF_TILE;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int64_t nbh = (int64_t)sh.B * sh.NH;
    const int qb = sh.nb - 1 - (int)(blockIdx.x / nbh);
    const int bh = (int)(blockIdx.x % nbh), b = bh / sh.NH, h = bh % sh.NH, kvh = h / sh.grp;
    const int64_t row0 = (int64_t)b * sh.T; /* the sequence's first row */
    const float *kb_ = k + row0 * sh.ldkv + (int64_t)kvh * sh.HS, *vb = v + row0 * sh.ldkv + (int64_t)kvh * sh.HS;
    af_load(Qs, q + row0 * sh.ldq + (int64_t)h * sh.HS, sh.ldq, qb * AF_B, sh.T, sh.HS);

    float o[8][4], m[8], l[8];
#pragma unroll
    for (int r = 0; r < 8; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < 4; c++) o[r][c] = 0.0f;
    }
    for (int kt = 0; kt <= qb; kt++) {
        __syncthreads(); /* the last tile's readers of Ks, Vs and Ps are done */
        af_load(Ks, kb_, sh.ldkv, kt * AF_B, sh.T, sh.HS);
        af_load(Vs, vb, sh.ldkv, kt * AF_B, sh.T, sh.HS);
        sdc_cp_commit();
        sdc_cp_wait<0>();
        __syncthreads();
        float s[8][4];
        af_abt(s, Qs, Ks, tx, ty);
#pragma unroll
        for (int r = 0; r < 8; r++) {
            const int i = qb * AF_B + ty + 8 * r;
            float mx = -INFINITY;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int j = kt * AF_B + tx + 16 * c;
                s[r][c] = (j <= i && j < sh.T) ? s[r][c] * sh.sl2 : -INFINITY;
                mx = fmaxf(mx, s[r][c]);
            }
            /* key kt*64 <= i lies in every tile up to the diagonal: mn is finite */
            const float mn = fmaxf(m[r], af_max16(mx));
            const float alpha = exp2f(m[r] - mn);
            m[r] = mn;
            float sum = 0.0f;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                s[r][c] = exp2f(s[r][c] - mn);
                sum += s[r][c];
                o[r][c] *= alpha;
            }
            l[r] = l[r] * alpha + sum;
        }
#pragma unroll
        for (int r = 0; r < 8; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) Ps[(ty + 8 * r) * AF_LDP + tx + 16 * c] = s[r][c];
        __syncthreads();
        af_pv(o, Ps, Vs, tx, ty);
    }
    const int W = sh.NH * sh.HS;
#pragma unroll
    for (int r = 0; r < 8; r++) {
        const float sum = af_sum16(l[r]);
        const int i = qb * AF_B + ty + 8 * r;
        if (i >= sh.T) continue;
        const float inv = 1.0f / sum;
        float *orow = out + (row0 + i) * W + (int64_t)h * sh.HS;
#pragma unroll
        for (int c = 0; c < 4; c++)
            if (4 * tx + c < sh.HS) orow[4 * tx + c] = o[r][c] * inv;
        if (tx == 0) lse[(int64_t)bh * sh.T + i] = (m[r] + log2f(sum)) * AF_LN2;
    }
}

/* D[(b*NH + h)*T + i] = rowsum(dout * out) of head h at row b*T + i: a warp a row. */
__global__ void __launch_bounds__(256)
    af_backward_d(float *__restrict__ D, const float *__restrict__ dout, const float *__restrict__ out,
                  const af_shape sh) {
    const int64_t idx = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (idx >= (int64_t)sh.B * sh.NH * sh.T) return;
    const int64_t bh = idx / sh.T, i = idx % sh.T;
    const int64_t b = bh / sh.NH, h = bh % sh.NH;
    const int64_t at = ((b * sh.T + i) * sh.NH + h) * sh.HS;
    float x = 0.0f;
    for (int c = lane; c < sh.HS; c += 32) x = fmaf(dout[at + c], out[at + c], x);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    if (lane == 0) D[idx] = x;
}

/* dQ = scale * sum over the key tiles of dS K: one block per (sequence,
 * head, 64 queries), the dS tiles as af_backward_dkv wrote them (af_dstile),
 * each tile's copies and the next key tile's in flight while the last
 * product runs (two buffers). */
__global__ void __launch_bounds__(AF_THREADS)
    af_backward_dq(float *__restrict__ dq, const float *__restrict__ k, float *__restrict__ dS,
                   const af_shape sh) {
    extern __shared__ float4 af_smem[];
    /* buffer u (0, 1): its dS tile at DSs + u * AF_PTILE, its K tile at Ks + u * AF_TILE */
    float *DSs = (float *)af_smem, *Ks = DSs + 2 * AF_PTILE;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int64_t nbh = (int64_t)sh.B * sh.NH;
    const int qb = sh.nb - 1 - (int)(blockIdx.x / nbh);
    const int bh = (int)(blockIdx.x % nbh), b = bh / sh.NH, h = bh % sh.NH, kvh = h / sh.grp;
    const int64_t row0 = (int64_t)b * sh.T;
    const float *kb_ = k + row0 * sh.ldkv + (int64_t)kvh * sh.HS;
    auto load = [&](int kt) {
        af_load<AF_LDP>(DSs + (kt & 1) * AF_PTILE, af_dstile(dS, sh, bh, qb, kt), AF_B, 0, AF_B, AF_B);
        af_load(Ks + (kt & 1) * AF_TILE, kb_, sh.ldkv, kt * AF_B, sh.T, sh.HS);
        sdc_cp_commit();
    };
    float acc[8][4];
#pragma unroll
    for (int r = 0; r < 8; r++)
#pragma unroll
        for (int c = 0; c < 4; c++) acc[r][c] = 0.0f;
    load(0);
    for (int kt = 0; kt <= qb; kt++) {
        if (kt < qb) {
            load(kt + 1); /* the other buffers: their last readers passed the barrier below */
            sdc_cp_wait<1>();
        } else {
            sdc_cp_wait<0>();
        }
        __syncthreads();
        af_pv(acc, DSs + (kt & 1) * AF_PTILE, Ks + (kt & 1) * AF_TILE, tx, ty);
        __syncthreads(); /* no thread reads these buffers any more */
    }
#pragma unroll
    for (int r = 0; r < 8; r++) {
        const int i = qb * AF_B + ty + 8 * r;
        if (i >= sh.T) continue;
        float *row = dq + (row0 + i) * sh.ldq + (int64_t)h * sh.HS;
#pragma unroll
        for (int c = 0; c < 4; c++)
            if (4 * tx + c < sh.HS) row[4 * tx + c] = acc[r][c] * sh.scale;
    }
}

__global__ void __launch_bounds__(AF_THREADS)
    af_backward_dkv(float *__restrict__ dk, float *__restrict__ dv, float *__restrict__ dS, const float *__restrict__ dout,
                    const float *__restrict__ q, const float *__restrict__ k, const float *__restrict__ v,
                    const float *__restrict__ lse, const float *__restrict__ D, const af_shape sh) {
    extern __shared__ float4 af_smem[];
    float *Ks = (float *)af_smem, *Vs = Ks + AF_TILE, *Qs = Vs + AF_TILE, *dOs = Qs + AF_TILE,
          *PTs = dOs + AF_TILE, *DSTs = PTs + AF_PTILE, *Ls = DSTs + AF_PTILE, *Ds = Ls + AF_B;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int64_t nbk = (int64_t)sh.B * sh.KVH;
    const int kt = (int)(blockIdx.x / nbk); /* the first key tiles see the most query tiles: first */
    const int bk = (int)(blockIdx.x % nbk), b = bk / sh.KVH, kvh = bk % sh.KVH;
    const int64_t row0 = (int64_t)b * sh.T;
    const int W = sh.NH * sh.HS;
    af_load(Ks, k + row0 * sh.ldkv + (int64_t)kvh * sh.HS, sh.ldkv, kt * AF_B, sh.T, sh.HS);
    af_load(Vs, v + row0 * sh.ldkv + (int64_t)kvh * sh.HS, sh.ldkv, kt * AF_B, sh.T, sh.HS);
    float dka[8][4], dva[8][4];
#pragma unroll
    for (int r = 0; r < 8; r++)
#pragma unroll
        for (int c = 0; c < 4; c++) dka[r][c] = dva[r][c] = 0.0f;
    for (int g = 0; g < sh.grp; g++) {
        const int h = kvh * sh.grp + g;
        const int64_t bh = (int64_t)b * sh.NH + h;
        for (int qt = kt; qt < sh.nb; qt++) {
            __syncthreads(); /* the last tile's readers of Qs, dOs, PTs, DSTs are done */
            af_load(Qs, q + row0 * sh.ldq + (int64_t)h * sh.HS, sh.ldq, qt * AF_B, sh.T, sh.HS);
            af_load(dOs, dout + row0 * W + (int64_t)h * sh.HS, W, qt * AF_B, sh.T, sh.HS);
            if (threadIdx.x < AF_B) {
                const int i = qt * AF_B + threadIdx.x;
                Ls[threadIdx.x] = i < sh.T ? lse[bh * sh.T + i] * AF_LOG2E : 0.0f;
                Ds[threadIdx.x] = i < sh.T ? D[bh * sh.T + i] : 0.0f;
            }
            sdc_cp_commit();
            sdc_cp_wait<0>();
            __syncthreads();
            float st[8][4], dpt[8][4]; /* [key row][query column] */
            af_abt(st, Ks, Qs, tx, ty);
            af_abt(dpt, Vs, dOs, tx, ty);
#pragma unroll
            for (int r = 0; r < 8; r++) {
                const int j = kt * AF_B + ty + 8 * r;
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int ic = tx + 16 * c, i = qt * AF_B + ic;
                    const float p = (j <= i && i < sh.T) ? exp2f(st[r][c] * sh.sl2 - Ls[ic]) : 0.0f;
                    PTs[(ty + 8 * r) * AF_LDP + ic] = p;
                    DSTs[(ty + 8 * r) * AF_LDP + ic] = p * (dpt[r][c] - Ds[ic]);
                }
            }
            __syncthreads();
            { /* dS's tile for af_backward_dq, transposed: thread (i, half) writes row i's keys of its half */
                float *t = af_dstile(dS, sh, bh, qt, kt);
                const int i = threadIdx.x & 63, j0 = (threadIdx.x >> 6) * 32;
#pragma unroll
                for (int j = j0; j < j0 + 32; j += 4) {
                    const float4 x = {DSTs[j * AF_LDP + i], DSTs[(j + 1) * AF_LDP + i], DSTs[(j + 2) * AF_LDP + i],
                                      DSTs[(j + 3) * AF_LDP + i]};
                    *(float4 *)&t[i * AF_B + j] = x;
                }
            }
            af_pv(dva, PTs, dOs, tx, ty);
            af_pv(dka, DSTs, Qs, tx, ty);
        }
    }
#pragma unroll
    for (int r = 0; r < 8; r++) {
        const int j = kt * AF_B + ty + 8 * r;
        if (j >= sh.T) continue;
        float *krow = dk + (row0 + j) * sh.ldkv + (int64_t)kvh * sh.HS;
        float *vrow = dv + (row0 + j) * sh.ldkv + (int64_t)kvh * sh.HS;
#pragma unroll
        for (int c = 0; c < 4; c++)
            if (4 * tx + c < sh.HS) {
                krow[4 * tx + c] = dka[r][c] * sh.scale;
                vrow[4 * tx + c] = dva[r][c];
            }
    }
}

/* ---- the launchers ---- */

#define AF_FWD_SMEM ((3 * AF_TILE + AF_PTILE) * sizeof(float))
#define AF_DQ_SMEM ((2 * AF_TILE + 2 * AF_PTILE) * sizeof(float))
#define AF_DKV_SMEM ((4 * AF_TILE + 2 * AF_PTILE + 2 * AF_B) * sizeof(float))

/* The checked shape of a call, or why not (what names it). */
static int af_shape_of(const char *what, const sdc_ctx *c, int64_t ldq, int64_t ldkv, int64_t B, int64_t T, int64_t NH,
                       int64_t KVH, int64_t HS, af_shape *sh) {
    if (!c) return SD_FAIL(SD_ERR_ARG, "%s: no context", what);
    bool ok = B >= 1 && T >= 1 && NH >= 1 && KVH >= 1 && HS >= 1 && HS <= AF_D && B <= INT_MAX && T <= INT_MAX &&
              NH <= INT_MAX / AF_D && KVH <= NH && NH % KVH == 0 && ldq >= NH * HS && ldkv >= KVH * HS;
    if (ok) { /* every element's offset within 2^60, every grid within an int */
        int64_t widest = ldq > ldkv ? ldq : ldkv;
        ok = B * T <= ((int64_t)1 << 60) / widest && B * NH * T <= (int64_t)INT_MAX * 8;
    }
    if (ok) { /* the backward's scratch, D and the dS tiles, within 2^60 floats */
        const int64_t nb = (T + AF_B - 1) / AF_B;
        ok = nb * (nb + 1) / 2 <= ((int64_t)1 << 48) / (B * NH);
    }
    if (!ok)
        return SD_FAIL(SD_ERR_ARG,
                       "%s: B=%lld T=%lld NH=%lld KVH=%lld HS=%lld ldq=%lld ldkv=%lld (want sizes >= 1, HS <= 64, NH a "
                       "multiple of KVH, ldq >= NH*HS, ldkv >= KVH*HS)",
                       what, (long long)B, (long long)T, (long long)NH, (long long)KVH, (long long)HS, (long long)ldq,
                       (long long)ldkv);
    sh->ldq = ldq;
    sh->ldkv = ldkv;
    sh->B = (int)B;
    sh->T = (int)T;
    sh->NH = (int)NH;
    sh->KVH = (int)KVH;
    sh->grp = (int)(NH / KVH);
    sh->HS = (int)HS;
    sh->nb = (int)((T + AF_B - 1) / AF_B);
    sh->scale = (float)(1.0 / sqrt((double)HS));
    sh->sl2 = (float)(1.4426950408889634 / sqrt((double)HS));
    return SD_OK;
}

/* Raises a kernel's dynamic shared memory limit (once per kernel). */
static int af_smem_attr(const void *kernel, size_t bytes, int *done) {
    if (*done) return SD_OK;
    SD_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    *done = 1;
    return SD_OK;
}

extern "C" int sdc_attention_f32(const sdc_ctx *c, uint64_t out, uint64_t lse, uint64_t q, uint64_t k, uint64_t v,
                                 int64_t ldq, int64_t ldkv, int64_t B, int64_t T, int64_t NH, int64_t KVH, int64_t HS) {
    static const char what[] = "sdc_attention_f32";
    static int attr;
    af_shape sh;
    SD_TRY(af_shape_of(what, c, ldq, ldkv, B, T, NH, KVH, HS, &sh));
    if (!out || !lse || !q || !k || !v) return SD_FAIL(SD_ERR_ARG, "%s: NULL pointer", what);
    SD_TRY(sdc_use_device(c->device));
    SD_TRY(af_smem_attr((const void *)af_forward, AF_FWD_SMEM, &attr));
    const unsigned blocks = (unsigned)((int64_t)sh.B * sh.NH * sh.nb);
    af_forward<<<blocks, AF_THREADS, AF_FWD_SMEM, (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)out, (float *)(uintptr_t)lse, (const float *)(uintptr_t)q, (const float *)(uintptr_t)k,
        (const float *)(uintptr_t)v, sh);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_attention_backward_f32(const sdc_ctx *c, uint64_t dq, uint64_t dk, uint64_t dv, uint64_t dout,
                                          uint64_t q, uint64_t k, uint64_t v, uint64_t out, uint64_t lse, int64_t ldq,
                                          int64_t ldkv, int64_t B, int64_t T, int64_t NH, int64_t KVH, int64_t HS,
                                          uint64_t scratch) {
    static const char what[] = "sdc_attention_backward_f32";
    static int attr_dq, attr_dkv;
    af_shape sh;
    SD_TRY(af_shape_of(what, c, ldq, ldkv, B, T, NH, KVH, HS, &sh));
    const uint64_t ptrs[] = {dq, dk, dv, dout, q, k, v, out, lse, scratch};
    for (uint64_t p : ptrs)
        if (!p) return SD_FAIL(SD_ERR_ARG, "%s: NULL pointer", what);
    SD_TRY(sdc_use_device(c->device));
    SD_TRY(af_smem_attr((const void *)af_backward_dq, AF_DQ_SMEM, &attr_dq));
    SD_TRY(af_smem_attr((const void *)af_backward_dkv, AF_DKV_SMEM, &attr_dkv));
    cudaStream_t s = (cudaStream_t)(uintptr_t)c->stream;
    float *D = (float *)(uintptr_t)scratch;
    const float *fq = (const float *)(uintptr_t)q, *fk = (const float *)(uintptr_t)k, *fv = (const float *)(uintptr_t)v,
                *fo = (const float *)(uintptr_t)out, *fdo = (const float *)(uintptr_t)dout,
                *fl = (const float *)(uintptr_t)lse;
    const int64_t rows = (int64_t)sh.B * sh.NH * sh.T;
    float *dS = D + ((rows + 3) & ~(int64_t)3); /* 16-byte aligned, after D */
    af_backward_d<<<(unsigned)((rows + 7) / 8), 256, 0, s>>>(D, fdo, fo, sh);
    SD_CUDA(cudaGetLastError());
    af_backward_dkv<<<(unsigned)((int64_t)sh.B * sh.KVH * sh.nb), AF_THREADS, AF_DKV_SMEM, s>>>(
        (float *)(uintptr_t)dk, (float *)(uintptr_t)dv, dS, fdo, fq, fk, fv, fl, D, sh);
    SD_CUDA(cudaGetLastError());
    af_backward_dq<<<(unsigned)((int64_t)sh.B * sh.NH * sh.nb), AF_THREADS, AF_DQ_SMEM, s>>>(
        (float *)(uintptr_t)dq, fk, dS, sh);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
