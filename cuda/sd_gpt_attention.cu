/*
 * sd_gpt_attention.cu: causal self-attention, flash style, on tensor cores
 * through nvcuda::wmma bf16 fragments (16x16x16, fp32 accumulation)
 * (symddp_gpt.h). The (T,T) scores never reach global memory.
 *
 * Tiles: 64 queries x 64 keys, 4 warps per block, each warp 16 rows of the
 * block's tile. Scores are kept in log2 units: x = q.k * scale * log2(e).
 *
 * forward (block: 64 queries of one (b,h), grid (T/64, B*NH), last tiles first):
 *   for each key tile kt <= qt: S = Q K^T (wmma, to the warp's fp32 smem tile);
 *   lane pairs own a row (lane/2) and 32 of its columns: causal mask, running
 *   max m and sum l (online softmax), O *= exp2(m_old - m_new), P (bf16) to
 *   smem; then P V (wmma) to smem and added to the lane's O (32 registers).
 *   out = O / l; lse = (m + log2 l) * ln 2, the natural-log logsumexp.
 * backward, two kernels so that no gradient needs atomics:
 *   D[b,h,t] = sum_d dout * out (one thread per row);
 *   dK/dV (block: 64 keys, warps 16 keys each, looping over query tiles >= kt):
 *     S^T = K Q^T, dP^T = V dO^T, P^T = exp2(S^T - lse), dS^T = P^T (dP^T - D) scale,
 *     dV += P^T dO, dK += dS^T Q (accumulators stay in fragments);
 *   dQ (block: 64 queries, looping over key tiles <= qt):
 *     S = Q K^T, dP = dO V^T, dS = P (dP - D) scale, dQ += dS K.
 * Each gradient element is summed by one warp in a fixed tile order, so the
 * bits repeat. head size HS: 32 or 64 (templates); T a multiple of 64.
 * The operands are an sdg_att_io (sd_gpt.cuh): GPT-2's packed qkv, or
 * grouped-query attention's three tensors, query head h reading key/value
 * head h/grp; there the dK/dV block of a key tile and key/value head loops
 * over the group's query heads in order, each over its query tiles, so the
 * key/value head's gradient sums its group in the fragments, in a fixed
 * order (for grp = 1 the loop of before).
 */
#include <math.h>
#include <mma.h>

#include "sd_gpt.cuh"

using namespace nvcuda;

#define SDG_ATT_TILE 64
#define SDG_ATT_WARPS 4
#define SDG_ATT_THREADS (SDG_ATT_WARPS * 32)
#define SDG_ATT_LDS (SDG_ATT_TILE + 4) /* fp32 score tiles: row length */
#define SDG_ATT_LDP (SDG_ATT_TILE + 8) /* bf16 P tiles: row length */
#define SDG_LOG2E 1.4426950408889634f
#define SDG_LN2 0.6931471805599453f

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> sdg_frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> sdg_frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> sdg_frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> sdg_frag_c;

/* Copies 64 rows of HS bf16 (global rows ld elements apart) to smem rows LDH apart. */
template <int HS>
static __device__ __forceinline__ void sdg_att_load_tile(bf16 *dst, const bf16 *src, size_t ld) {
    constexpr int LDH = HS + 8;
    constexpr int VPR = HS / 8;
    for (int idx = threadIdx.x; idx < SDG_ATT_TILE * VPR; idx += SDG_ATT_THREADS) {
        const int r = idx / VPR, c = (idx % VPR) * 8;
        *reinterpret_cast<uint4 *>(dst + r * LDH + c) = *reinterpret_cast<const uint4 *>(src + (size_t)r * ld + c);
    }
}

/* Writes a warp's 16 x HS fp32 tile (smem, row length SDG_ATT_LDS) as bf16 rows ld apart. */
template <int HS>
static __device__ __forceinline__ void sdg_att_store_rows(bf16 *dst, size_t ld, const float *tile, int lane) {
    const int r = lane >> 1, c0 = (lane & 1) * (HS / 2);
#pragma unroll
    for (int c = 0; c < HS / 2; c += 8) {
        float f[8];
#pragma unroll
        for (int k = 0; k < 8; k++) f[k] = tile[r * SDG_ATT_LDS + c0 + c + k];
        sdg_store8(dst + (size_t)r * ld + c0 + c, f);
    }
}

template <int HS>
static size_t sdg_att_fwd_smem() {
    return (size_t)3 * SDG_ATT_TILE * (HS + 8) * sizeof(bf16) +
           (size_t)SDG_ATT_WARPS * 16 * SDG_ATT_LDS * sizeof(float) +
           (size_t)SDG_ATT_WARPS * 16 * SDG_ATT_LDP * sizeof(bf16);
}

template <int HS>
__global__ void __launch_bounds__(SDG_ATT_THREADS)
    sdg_att_fwd_kernel(bf16 *__restrict__ out, float *__restrict__ lse, const sdg_att_io io, int T,
                       float scale_log2) {
    constexpr int LDH = HS + 8;
    extern __shared__ __align__(128) float4 sdg_att_smem[]; /* wmma wants 32-byte aligned tiles */
    bf16 *sQ = reinterpret_cast<bf16 *>(sdg_att_smem);
    bf16 *sK = sQ + SDG_ATT_TILE * LDH;
    bf16 *sV = sK + SDG_ATT_TILE * LDH;
    float *sS = reinterpret_cast<float *>(sV + SDG_ATT_TILE * LDH);
    bf16 *sP = reinterpret_cast<bf16 *>(sS + SDG_ATT_WARPS * 16 * SDG_ATT_LDS);

    const int qt = gridDim.x - 1 - blockIdx.x;
    const int NH = io.NH, C = NH * HS;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / io.grp;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t ldq = (size_t)io.ldq, ldkv = (size_t)io.ldkv;
    float *myS = sS + warp * 16 * SDG_ATT_LDS;
    bf16 *myP = sP + warp * 16 * SDG_ATT_LDP;

    sdg_att_load_tile<HS>(sQ, io.q + ((size_t)b * T + (size_t)qt * SDG_ATT_TILE) * ldq + h * HS, ldq);
    __syncthreads();
    sdg_frag_a qf[HS / 16];
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) wmma::load_matrix_sync(qf[kk], sQ + warp * 16 * LDH + kk * 16, LDH);

    const int r = lane >> 1, half = lane & 1;
    const int qrow = qt * SDG_ATT_TILE + warp * 16 + r;
    float o[HS / 2];
#pragma unroll
    for (int d = 0; d < HS / 2; d++) o[d] = 0.f;
    float m_run = -INFINITY, l_run = 0.f;

    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads(); /* every warp is done with the previous K and V */
        const size_t kv = ((size_t)b * T + (size_t)kt * SDG_ATT_TILE) * ldkv + kvh * HS;
        sdg_att_load_tile<HS>(sK, io.k + kv, ldkv);
        sdg_att_load_tile<HS>(sV, io.v + kv, ldkv);
        __syncthreads();
#pragma unroll
        for (int nt = 0; nt < SDG_ATT_TILE / 16; nt++) {
            sdg_frag_c sf;
            wmma::fill_fragment(sf, 0.f);
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
                sdg_frag_b_col kf;
                wmma::load_matrix_sync(kf, sK + nt * 16 * LDH + kk * 16, LDH);
                wmma::mma_sync(sf, qf[kk], kf, sf);
            }
            wmma::store_matrix_sync(myS + nt * 16, sf, SDG_ATT_LDS, wmma::mem_row_major);
        }
        __syncwarp();
        float sv[32];
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            const int col = half * 32 + j;
            float x = myS[r * SDG_ATT_LDS + col] * scale_log2;
            if (kt * SDG_ATT_TILE + col > qrow) x = -INFINITY;
            sv[j] = x;
            mx = fmaxf(mx, x);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float m_new = fmaxf(m_run, mx); /* finite: key kt*64 <= qrow */
        const float alpha = exp2f(m_run - m_new);
        float ps = 0.f;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            const bf16 pb = __float2bfloat16(exp2f(sv[j] - m_new));
            ps += __bfloat162float(pb);
            myP[r * SDG_ATT_LDP + half * 32 + j] = pb;
        }
        ps += __shfl_xor_sync(0xffffffffu, ps, 1);
        l_run = l_run * alpha + ps;
        m_run = m_new;
#pragma unroll
        for (int d = 0; d < HS / 2; d++) o[d] *= alpha;
        __syncwarp();
#pragma unroll
        for (int nt = 0; nt < HS / 16; nt++) {
            sdg_frag_c pf;
            wmma::fill_fragment(pf, 0.f);
#pragma unroll
            for (int kk = 0; kk < SDG_ATT_TILE / 16; kk++) {
                sdg_frag_a pa;
                sdg_frag_b_row vb;
                wmma::load_matrix_sync(pa, myP + kk * 16, SDG_ATT_LDP);
                wmma::load_matrix_sync(vb, sV + kk * 16 * LDH + nt * 16, LDH);
                wmma::mma_sync(pf, pa, vb, pf);
            }
            wmma::store_matrix_sync(myS + nt * 16, pf, SDG_ATT_LDS, wmma::mem_row_major);
        }
        __syncwarp();
#pragma unroll
        for (int d = 0; d < HS / 2; d++) o[d] += myS[r * SDG_ATT_LDS + half * (HS / 2) + d];
        __syncwarp();
    }
    const float inv = 1.f / l_run;
    bf16 *op = out + ((size_t)b * T + qrow) * C + h * HS + half * (HS / 2);
#pragma unroll
    for (int d = 0; d < HS / 2; d += 8) {
        float f[8];
#pragma unroll
        for (int k = 0; k < 8; k++) f[k] = o[d + k] * inv;
        sdg_store8(op + d, f);
    }
    if (half == 0) lse[(size_t)bh * T + qrow] = (m_run + log2f(l_run)) * SDG_LN2;
}

/* D[(b*NH + h)*T + t] = sum_d dout[b,t,h*HS+d] * out[b,t,h*HS+d]. */
__global__ void sdg_att_bwd_pre_kernel(float *__restrict__ D, const bf16 *__restrict__ dout,
                                       const bf16 *__restrict__ out, int B, int T, int C, int NH, int HS) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NH * T) return;
    const int t = idx % T, h = (idx / T) % NH, b = idx / (T * NH);
    const size_t off = ((size_t)b * T + t) * C + (size_t)h * HS;
    float s = 0.f;
    for (int d = 0; d < HS; d += 8) {
        float x[8], y[8];
        sdg_load8(dout + off + d, x);
        sdg_load8(out + off + d, y);
#pragma unroll
        for (int k = 0; k < 8; k++) s += x[k] * y[k];
    }
    D[idx] = s;
}

template <int HS>
static size_t sdg_att_bkv_smem() {
    return (size_t)4 * SDG_ATT_TILE * (HS + 8) * sizeof(bf16) + (size_t)2 * SDG_ATT_TILE * sizeof(float) +
           (size_t)SDG_ATT_WARPS * 16 * (2 * SDG_ATT_LDS * sizeof(float) + 2 * SDG_ATT_LDP * sizeof(bf16));
}

template <int HS>
__global__ void __launch_bounds__(SDG_ATT_THREADS)
    sdg_att_bwd_kv_kernel(const bf16 *__restrict__ dout, const sdg_att_io io, const float *__restrict__ lse,
                          const float *__restrict__ D, int T, float scale_log2, float scale) {
    constexpr int LDH = HS + 8;
    extern __shared__ __align__(128) float4 sdg_att_smem[]; /* wmma wants 32-byte aligned tiles */
    bf16 *sK = reinterpret_cast<bf16 *>(sdg_att_smem);
    bf16 *sV = sK + SDG_ATT_TILE * LDH;
    bf16 *sQ = sV + SDG_ATT_TILE * LDH;
    bf16 *sO = sQ + SDG_ATT_TILE * LDH; /* dout */
    float *sL = reinterpret_cast<float *>(sO + SDG_ATT_TILE * LDH); /* lse * log2(e) */
    float *sD = sL + SDG_ATT_TILE;
    float *sS = sD + SDG_ATT_TILE;                           /* [warps][16][LDS] */
    float *sdP = sS + SDG_ATT_WARPS * 16 * SDG_ATT_LDS;      /* [warps][16][LDS] */
    bf16 *sP = reinterpret_cast<bf16 *>(sdP + SDG_ATT_WARPS * 16 * SDG_ATT_LDS); /* [warps][16][LDP] */
    bf16 *sdS = sP + SDG_ATT_WARPS * 16 * SDG_ATT_LDP;

    const int kt = blockIdx.x;
    const int nT = T / SDG_ATT_TILE;
    const int NH = io.NH, grp = io.grp, KVH = NH / grp, C = NH * HS;
    const int bkv = blockIdx.y, b = bkv / KVH, kvh = bkv % KVH;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t ldq = (size_t)io.ldq, ldkv = (size_t)io.ldkv;
    const bf16 *dbase = dout + (size_t)b * T * C;
    float *myS = sS + warp * 16 * SDG_ATT_LDS;
    float *mydP = sdP + warp * 16 * SDG_ATT_LDS;
    bf16 *myP = sP + warp * 16 * SDG_ATT_LDP;
    bf16 *mydS = sdS + warp * 16 * SDG_ATT_LDP;

    const size_t kvrows = ((size_t)b * T + (size_t)kt * SDG_ATT_TILE) * ldkv + kvh * HS;
    sdg_att_load_tile<HS>(sK, io.k + kvrows, ldkv);
    sdg_att_load_tile<HS>(sV, io.v + kvrows, ldkv);
    __syncthreads();
    sdg_frag_a kf[HS / 16], vf[HS / 16];
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        wmma::load_matrix_sync(kf[kk], sK + warp * 16 * LDH + kk * 16, LDH);
        wmma::load_matrix_sync(vf[kk], sV + warp * 16 * LDH + kk * 16, LDH);
    }
    sdg_frag_c dk[HS / 16], dv[HS / 16];
#pragma unroll
    for (int nt = 0; nt < HS / 16; nt++) {
        wmma::fill_fragment(dk[nt], 0.f);
        wmma::fill_fragment(dv[nt], 0.f);
    }
    const int r = lane >> 1, half = lane & 1;
    const int key = kt * SDG_ATT_TILE + warp * 16 + r;

    for (int it = 0; it < grp * (nT - kt); it++) { /* the group's query heads in order, each over qt = kt..nT-1 */
        const int h = kvh * grp + it / (nT - kt), qt = kt + it % (nT - kt), bh = b * NH + h;
        __syncthreads(); /* every warp is done with the previous Q and dO */
        sdg_att_load_tile<HS>(sQ, io.q + ((size_t)b * T + (size_t)qt * SDG_ATT_TILE) * ldq + h * HS, ldq);
        sdg_att_load_tile<HS>(sO, dbase + (size_t)qt * SDG_ATT_TILE * C + h * HS, (size_t)C);
        for (int i = threadIdx.x; i < SDG_ATT_TILE; i += SDG_ATT_THREADS) {
            const size_t row = (size_t)bh * T + qt * SDG_ATT_TILE + i;
            sL[i] = lse[row] * SDG_LOG2E;
            sD[i] = D[row];
        }
        __syncthreads();
#pragma unroll
        for (int nt = 0; nt < SDG_ATT_TILE / 16; nt++) {
            sdg_frag_c sf, pf;
            wmma::fill_fragment(sf, 0.f);
            wmma::fill_fragment(pf, 0.f);
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
                sdg_frag_b_col qb, ob;
                wmma::load_matrix_sync(qb, sQ + nt * 16 * LDH + kk * 16, LDH);
                wmma::mma_sync(sf, kf[kk], qb, sf);
                wmma::load_matrix_sync(ob, sO + nt * 16 * LDH + kk * 16, LDH);
                wmma::mma_sync(pf, vf[kk], ob, pf);
            }
            wmma::store_matrix_sync(myS + nt * 16, sf, SDG_ATT_LDS, wmma::mem_row_major);
            wmma::store_matrix_sync(mydP + nt * 16, pf, SDG_ATT_LDS, wmma::mem_row_major);
        }
        __syncwarp();
#pragma unroll 8
        for (int j = 0; j < 32; j++) {
            const int col = half * 32 + j;
            const int q = qt * SDG_ATT_TILE + col;
            float p = 0.f;
            if (q >= key) p = exp2f(myS[r * SDG_ATT_LDS + col] * scale_log2 - sL[col]);
            const float ds = p * (mydP[r * SDG_ATT_LDS + col] - sD[col]) * scale;
            myP[r * SDG_ATT_LDP + col] = __float2bfloat16(p);
            mydS[r * SDG_ATT_LDP + col] = __float2bfloat16(ds);
        }
        __syncwarp();
#pragma unroll
        for (int nt = 0; nt < HS / 16; nt++) {
#pragma unroll
            for (int kk = 0; kk < SDG_ATT_TILE / 16; kk++) {
                sdg_frag_a pa, sa;
                sdg_frag_b_row ob, qb;
                wmma::load_matrix_sync(pa, myP + kk * 16, SDG_ATT_LDP);
                wmma::load_matrix_sync(ob, sO + kk * 16 * LDH + nt * 16, LDH);
                wmma::mma_sync(dv[nt], pa, ob, dv[nt]);
                wmma::load_matrix_sync(sa, mydS + kk * 16, SDG_ATT_LDP);
                wmma::load_matrix_sync(qb, sQ + kk * 16 * LDH + nt * 16, LDH);
                wmma::mma_sync(dk[nt], sa, qb, dk[nt]);
            }
        }
    }
    /* dK, then dV, through the warp's score tile (HS <= 64 columns). */
    const size_t drow = ((size_t)b * T + kt * SDG_ATT_TILE + warp * 16) * ldkv + kvh * HS;
    __syncwarp();
#pragma unroll
    for (int nt = 0; nt < HS / 16; nt++) wmma::store_matrix_sync(myS + nt * 16, dk[nt], SDG_ATT_LDS, wmma::mem_row_major);
    __syncwarp();
    sdg_att_store_rows<HS>(io.dk + drow, ldkv, myS, lane);
    __syncwarp();
#pragma unroll
    for (int nt = 0; nt < HS / 16; nt++) wmma::store_matrix_sync(myS + nt * 16, dv[nt], SDG_ATT_LDS, wmma::mem_row_major);
    __syncwarp();
    sdg_att_store_rows<HS>(io.dv + drow, ldkv, myS, lane);
}

template <int HS>
static size_t sdg_att_bq_smem() {
    return (size_t)4 * SDG_ATT_TILE * (HS + 8) * sizeof(bf16) +
           (size_t)SDG_ATT_WARPS * 16 * (2 * SDG_ATT_LDS * sizeof(float) + SDG_ATT_LDP * sizeof(bf16));
}

template <int HS>
__global__ void __launch_bounds__(SDG_ATT_THREADS)
    sdg_att_bwd_q_kernel(const bf16 *__restrict__ dout, const sdg_att_io io, const float *__restrict__ lse,
                         const float *__restrict__ D, int T, float scale_log2, float scale) {
    constexpr int LDH = HS + 8;
    extern __shared__ __align__(128) float4 sdg_att_smem[]; /* wmma wants 32-byte aligned tiles */
    bf16 *sQ = reinterpret_cast<bf16 *>(sdg_att_smem);
    bf16 *sO = sQ + SDG_ATT_TILE * LDH; /* dout */
    bf16 *sK = sO + SDG_ATT_TILE * LDH;
    bf16 *sV = sK + SDG_ATT_TILE * LDH;
    float *sS = reinterpret_cast<float *>(sV + SDG_ATT_TILE * LDH);
    float *sdP = sS + SDG_ATT_WARPS * 16 * SDG_ATT_LDS;
    bf16 *sdS = reinterpret_cast<bf16 *>(sdP + SDG_ATT_WARPS * 16 * SDG_ATT_LDS);

    const int qt = gridDim.x - 1 - blockIdx.x;
    const int NH = io.NH, C = NH * HS;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / io.grp;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t ldq = (size_t)io.ldq, ldkv = (size_t)io.ldkv;
    float *myS = sS + warp * 16 * SDG_ATT_LDS;
    float *mydP = sdP + warp * 16 * SDG_ATT_LDS;
    bf16 *mydS = sdS + warp * 16 * SDG_ATT_LDP;

    sdg_att_load_tile<HS>(sQ, io.q + ((size_t)b * T + (size_t)qt * SDG_ATT_TILE) * ldq + h * HS, ldq);
    sdg_att_load_tile<HS>(sO, dout + ((size_t)b * T + (size_t)qt * SDG_ATT_TILE) * C + h * HS, (size_t)C);
    __syncthreads();
    sdg_frag_a qf[HS / 16], of[HS / 16];
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        wmma::load_matrix_sync(qf[kk], sQ + warp * 16 * LDH + kk * 16, LDH);
        wmma::load_matrix_sync(of[kk], sO + warp * 16 * LDH + kk * 16, LDH);
    }
    sdg_frag_c dq[HS / 16];
#pragma unroll
    for (int nt = 0; nt < HS / 16; nt++) wmma::fill_fragment(dq[nt], 0.f);
    const int r = lane >> 1, half = lane & 1;
    const int qrow = qt * SDG_ATT_TILE + warp * 16 + r;
    const float lrow = lse[(size_t)bh * T + qrow] * SDG_LOG2E;
    const float drow = D[(size_t)bh * T + qrow];

    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads();
        const size_t kv = ((size_t)b * T + (size_t)kt * SDG_ATT_TILE) * ldkv + kvh * HS;
        sdg_att_load_tile<HS>(sK, io.k + kv, ldkv);
        sdg_att_load_tile<HS>(sV, io.v + kv, ldkv);
        __syncthreads();
#pragma unroll
        for (int nt = 0; nt < SDG_ATT_TILE / 16; nt++) {
            sdg_frag_c sf, pf;
            wmma::fill_fragment(sf, 0.f);
            wmma::fill_fragment(pf, 0.f);
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
                sdg_frag_b_col kb, vb;
                wmma::load_matrix_sync(kb, sK + nt * 16 * LDH + kk * 16, LDH);
                wmma::mma_sync(sf, qf[kk], kb, sf);
                wmma::load_matrix_sync(vb, sV + nt * 16 * LDH + kk * 16, LDH);
                wmma::mma_sync(pf, of[kk], vb, pf);
            }
            wmma::store_matrix_sync(myS + nt * 16, sf, SDG_ATT_LDS, wmma::mem_row_major);
            wmma::store_matrix_sync(mydP + nt * 16, pf, SDG_ATT_LDS, wmma::mem_row_major);
        }
        __syncwarp();
#pragma unroll 8
        for (int j = 0; j < 32; j++) {
            const int col = half * 32 + j;
            float p = 0.f;
            if (kt * SDG_ATT_TILE + col <= qrow) p = exp2f(myS[r * SDG_ATT_LDS + col] * scale_log2 - lrow);
            mydS[r * SDG_ATT_LDP + col] = __float2bfloat16(p * (mydP[r * SDG_ATT_LDS + col] - drow) * scale);
        }
        __syncwarp();
#pragma unroll
        for (int nt = 0; nt < HS / 16; nt++) {
#pragma unroll
            for (int kk = 0; kk < SDG_ATT_TILE / 16; kk++) {
                sdg_frag_a sa;
                sdg_frag_b_row kb;
                wmma::load_matrix_sync(sa, mydS + kk * 16, SDG_ATT_LDP);
                wmma::load_matrix_sync(kb, sK + kk * 16 * LDH + nt * 16, LDH);
                wmma::mma_sync(dq[nt], sa, kb, dq[nt]);
            }
        }
    }
    __syncwarp();
#pragma unroll
    for (int nt = 0; nt < HS / 16; nt++) wmma::store_matrix_sync(myS + nt * 16, dq[nt], SDG_ATT_LDS, wmma::mem_row_major);
    __syncwarp();
    sdg_att_store_rows<HS>(io.dq + ((size_t)b * T + qt * SDG_ATT_TILE + warp * 16) * ldq + h * HS, ldq, myS, lane);
}

static int sdg_att_check(const char *what, int B, int T, int C, int NH, int *hs) {
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH != 0)
        return SDG_FAIL(SDG_ERR_ARG, "%s: B=%d T=%d C=%d NH=%d", what, B, T, C, NH);
    *hs = C / NH;
    if (*hs != 32 && *hs != 64) return SDG_FAIL(SDG_ERR_ARG, "%s: head size %d (want 32 or 64)", what, *hs);
    if (T % SDG_ATT_TILE != 0) return SDG_FAIL(SDG_ERR_ARG, "%s: T=%d is not a multiple of %d", what, T, SDG_ATT_TILE);
    if ((long long)B * NH > 65535) return SDG_FAIL(SDG_ERR_ARG, "%s: B*NH=%d too large", what, B * NH);
    return SDG_OK;
}

/* Raises a kernel's dynamic shared memory limit to bytes (once per kernel). */
static int sdg_att_smem_attr(const void *kernel, size_t bytes, int *done) {
    if (*done) return SDG_OK;
    SDG_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    *done = 1;
    return SDG_OK;
}

template <int HS>
static int sdg_att_forward_hs(bf16 *out, float *lse, const sdg_att_io &io, int B, int T, cudaStream_t s) {
    static int done = 0;
    const size_t smem = sdg_att_fwd_smem<HS>();
    int rc = sdg_att_smem_attr((const void *)sdg_att_fwd_kernel<HS>, smem, &done);
    if (rc != SDG_OK) return rc;
    const float scale_log2 = SDG_LOG2E / sqrtf((float)HS);
    dim3 grid((unsigned)(T / SDG_ATT_TILE), (unsigned)(B * io.NH));
    sdg_att_fwd_kernel<HS><<<grid, SDG_ATT_THREADS, smem, s>>>(out, lse, io, T, scale_log2);
    SDG_LAUNCHED();
    return SDG_OK;
}

template <int HS>
static int sdg_att_backward_hs(const sdg_att_io &io, const bf16 *dout, const float *lse, const float *D, int B, int T,
                               cudaStream_t s) {
    static int done_kv = 0, done_q = 0;
    const size_t smem_kv = sdg_att_bkv_smem<HS>(), smem_q = sdg_att_bq_smem<HS>();
    int rc = sdg_att_smem_attr((const void *)sdg_att_bwd_kv_kernel<HS>, smem_kv, &done_kv);
    if (rc != SDG_OK) return rc;
    rc = sdg_att_smem_attr((const void *)sdg_att_bwd_q_kernel<HS>, smem_q, &done_q);
    if (rc != SDG_OK) return rc;
    const float scale = 1.f / sqrtf((float)HS);
    const float scale_log2 = scale * SDG_LOG2E;
    const unsigned tiles = (unsigned)(T / SDG_ATT_TILE);
    sdg_att_bwd_kv_kernel<HS><<<dim3(tiles, (unsigned)(B * (io.NH / io.grp))), SDG_ATT_THREADS, smem_kv, s>>>(
        dout, io, lse, D, T, scale_log2, scale);
    SDG_LAUNCHED();
    sdg_att_bwd_q_kernel<HS><<<dim3(tiles, (unsigned)(B * io.NH)), SDG_ATT_THREADS, smem_q, s>>>(dout, io, lse, D, T,
                                                                                              scale_log2, scale);
    SDG_LAUNCHED();
    return SDG_OK;
}

extern "C" int sdg_attention_forward_wmma(void *out, float *lse, const void *qkv, int B, int T, int C, int NH,
                                     void *stream) {
    int hs = 0;
    int rc = sdg_att_check("sdg_attention_forward_wmma", B, T, C, NH, &hs);
    if (rc != SDG_OK) return rc;
    if (!out || !lse || !qkv || !sdg_aligned16(out) || !sdg_aligned16(qkv))
        return SDG_FAIL(SDG_ERR_ARG, "sdg_attention_forward: NULL or unaligned pointer");
    return sdg_att_forward_io(out, lse, sdg_att_packed(qkv, NULL, C, NH), B, T, hs, stream);
}

/* The wmma forward on io (checked by the caller: HS 32 or 64). */
int sdg_att_forward_io(void *out, float *lse, const sdg_att_io &io, int B, int T, int HS, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (HS == 64) return sdg_att_forward_hs<64>((bf16 *)out, lse, io, B, T, s);
    return sdg_att_forward_hs<32>((bf16 *)out, lse, io, B, T, s);
}

/* D for the wmma kernels; where the mma kernels may run, also what they need
 * beside D; where cuDNN's attention is taken, its workspace instead */
extern "C" size_t sdg_attention_backward_scratch_bytes(int B, int T, int C, int NH) {
    if (B <= 0 || T <= 0 || NH <= 0) return 0;
    if (sdg_attention_use_cudnn(B, T, C, NH, NULL)) return sdg_attention_cudnn_scratch_bytes(B, T, C, NH);
    if (sdg_attention_mma_supported(T, C, NH)) return sdg_am_backward_scratch_bytes(B, T, NH);
    return (size_t)B * NH * T * sizeof(float);
}

extern "C" int sdg_attention_backward_wmma(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                                      int B, int T, int C, int NH, void *scratch, void *stream) {
    int hs = 0;
    int rc = sdg_att_check("sdg_attention_backward_wmma", B, T, C, NH, &hs);
    if (rc != SDG_OK) return rc;
    if (!dqkv || !dout || !qkv || !out || !lse || !scratch || !sdg_aligned16(dqkv) || !sdg_aligned16(dout) ||
        !sdg_aligned16(qkv) || !sdg_aligned16(out))
        return SDG_FAIL(SDG_ERR_ARG, "sdg_attention_backward: NULL or unaligned pointer");
    return sdg_att_backward_io(sdg_att_packed(qkv, dqkv, C, NH), dout, out, lse, B, T, hs, scratch, stream);
}

/* The wmma backward on io (checked by the caller: HS 32 or 64): D, then dK
 * and dV, then dQ. */
int sdg_att_backward_io(const sdg_att_io &io, const void *dout, const void *out, const float *lse, int B, int T,
                        int HS, void *scratch, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    float *D = (float *)scratch;
    const int NH = io.NH, rows = B * NH * T;
    sdg_att_bwd_pre_kernel<<<(rows + 255) / 256, 256, 0, s>>>(D, (const bf16 *)dout, (const bf16 *)out, B, T, NH * HS,
                                                              NH, HS);
    SDG_LAUNCHED();
    if (HS == 64) return sdg_att_backward_hs<64>(io, (const bf16 *)dout, lse, D, B, T, s);
    return sdg_att_backward_hs<32>(io, (const bf16 *)dout, lse, D, B, T, s);
}

/* The entry points: cuDNN's where sdg_attention_use_cudnn says so, else the
 * mma kernels where they apply (sd_gpt_attention_mma.cu), else wmma. */
extern "C" int sdg_attention_forward(void *out, float *lse, const void *qkv, int B, int T, int C, int NH,
                                     void *stream) {
    if (sdg_attention_use_cudnn(B, T, C, NH, stream))
        return sdg_attention_forward_cudnn(out, lse, qkv, B, T, C, NH, stream);
    if (sdg_attention_mma_supported(T, C, NH)) return sdg_attention_forward_mma(out, lse, qkv, B, T, C, NH, stream);
    return sdg_attention_forward_wmma(out, lse, qkv, B, T, C, NH, stream);
}

extern "C" int sdg_attention_backward(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                                      int B, int T, int C, int NH, void *scratch, void *stream) {
    if (sdg_attention_use_cudnn(B, T, C, NH, stream))
        return sdg_attention_backward_cudnn(dqkv, dout, qkv, out, lse, B, T, C, NH, scratch, stream);
    if (sdg_attention_mma_supported(T, C, NH))
        return sdg_attention_backward_mma(dqkv, dout, qkv, out, lse, B, T, C, NH, scratch, stream);
    return sdg_attention_backward_wmma(dqkv, dout, qkv, out, lse, B, T, C, NH, scratch, stream);
}

/* ---- grouped-query attention (sdg_gqa_*): the same kernels on three tensors ---- */

static int sdg_gqa_check(const char *what, int B, int T, int NH, int KVH, int HS) {
    if (B <= 0 || T <= 0 || NH <= 0 || KVH <= 0 || NH % KVH != 0)
        return SDG_FAIL(SDG_ERR_ARG, "%s: B=%d T=%d NH=%d KVH=%d (want NH a multiple of KVH)", what, B, T, NH, KVH);
    if (HS != 32 && HS != 64) return SDG_FAIL(SDG_ERR_ARG, "%s: head size %d (want 32 or 64)", what, HS);
    if (T % SDG_ATT_TILE != 0) return SDG_FAIL(SDG_ERR_ARG, "%s: T=%d is not a multiple of %d", what, T, SDG_ATT_TILE);
    if ((long long)B * NH > 65535) return SDG_FAIL(SDG_ERR_ARG, "%s: B*NH=%d too large", what, B * NH);
    return SDG_OK;
}

/* The mma kernels where they apply (head size 64, T a multiple of 128). */
static bool sdg_gqa_mma(int T, int NH, int HS) { return HS == 64 && sdg_attention_mma_supported(T, NH * HS, NH); }

static sdg_att_io sdg_gqa_io(const void *q, const void *k, const void *v, void *dq, void *dk, void *dv, int NH,
                             int KVH, int HS) {
    sdg_att_io io = {(const bf16 *)q, (const bf16 *)k, (const bf16 *)v, (bf16 *)dq, (bf16 *)dk, (bf16 *)dv,
                     NH * HS, KVH * HS, NH, NH / KVH};
    return io;
}

extern "C" int sdg_gqa_forward(void *out, float *lse, const void *q, const void *k, const void *v, int B, int T, int NH,
                               int KVH, int HS, void *stream) {
    int rc = sdg_gqa_check("sdg_gqa_forward", B, T, NH, KVH, HS);
    if (rc != SDG_OK) return rc;
    if (!out || !lse || !sdg_aligned16(out) || !q || !k || !v || !sdg_aligned16(q) || !sdg_aligned16(k) ||
        !sdg_aligned16(v))
        return SDG_FAIL(SDG_ERR_ARG, "sdg_gqa_forward: NULL or unaligned pointer");
    const sdg_att_io io = sdg_gqa_io(q, k, v, NULL, NULL, NULL, NH, KVH, HS);
    if (sdg_gqa_mma(T, NH, HS)) return sdg_am_forward_io(out, lse, io, B, T, stream);
    return sdg_att_forward_io(out, lse, io, B, T, HS, stream);
}

extern "C" size_t sdg_gqa_backward_scratch_bytes(int B, int T, int NH, int KVH, int HS) {
    if (B <= 0 || T <= 0 || NH <= 0 || KVH <= 0) return 0;
    if (sdg_gqa_mma(T, NH, HS)) return sdg_am_backward_scratch_bytes(B, T, NH);
    return (size_t)B * NH * T * sizeof(float);
}

extern "C" int sdg_gqa_backward(void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                                const void *v, const void *out, const float *lse, int B, int T, int NH, int KVH,
                                int HS, void *scratch, void *stream) {
    int rc = sdg_gqa_check("sdg_gqa_backward", B, T, NH, KVH, HS);
    if (rc != SDG_OK) return rc;
    const void *ptrs[] = {dq, dk, dv, dout, q, k, v, out};
    for (const void *p : ptrs)
        if (!p || !sdg_aligned16(p)) return SDG_FAIL(SDG_ERR_ARG, "sdg_gqa_backward: NULL or unaligned pointer");
    if (!lse || !scratch) return SDG_FAIL(SDG_ERR_ARG, "sdg_gqa_backward: NULL lse or scratch");
    const sdg_att_io io = sdg_gqa_io(q, k, v, dq, dk, dv, NH, KVH, HS);
    if (sdg_gqa_mma(T, NH, HS)) return sdg_am_backward_io(io, dout, out, lse, B, T, scratch, stream);
    return sdg_att_backward_io(io, dout, out, lse, B, T, HS, scratch, stream);
}
