/*
 * sd_compute_attention_wmma.cu: the bf16 causal self-attention, flash style,
 * on tensor cores through nvcuda::wmma bf16 fragments (16x16x16, fp32
 * accumulation): SDC_ATTN_WMMA of sdc_attention_bf16 and
 * sdc_grouped_attention_bf16 (symddp_compute.h; their launchers, which check
 * the arguments, are in sd_compute_attention.cu). The reference and the
 * fallback of the mma kernels (sd_compute_attention_mma.cu). The (T,T)
 * scores never reach global memory.
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
 * The operands are an sdc_att_io (sd_compute_attention.cuh): GPT-2's packed qkv, or
 * grouped-query attention's three tensors, query head h reading key/value
 * head h/grp; there the dK/dV block of a key tile and key/value head loops
 * over the group's query heads in order, each over its query tiles, so the
 * key/value head's gradient sums its group in the fragments, in a fixed
 * order (for grp = 1 the loop of before).
 */
#include <math.h>
#include <mma.h>

#include "sd_compute_attention.cuh"

using namespace nvcuda;

#define SDC_ATT_TILE 64
#define SDC_ATT_WARPS 4
#define SDC_ATT_THREADS (SDC_ATT_WARPS * 32)
#define SDC_ATT_LDS (SDC_ATT_TILE + 4) /* fp32 score tiles: row length */
#define SDC_ATT_LDP (SDC_ATT_TILE + 8) /* bf16 P tiles: row length */
#define SDC_ATT_LOG2E 1.4426950408889634f
#define SDC_ATT_LN2 0.6931471805599453f

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> sdc_frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> sdc_frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> sdc_frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> sdc_frag_c;

/* Copies 64 rows of HS bf16 (global rows ld elements apart) to smem rows LDH apart. */
template <int HS>
static __device__ __forceinline__ void sdc_att_load_tile(bf16 *dst, const bf16 *src, size_t ld) {
    constexpr int LDH = HS + 8;
    constexpr int VPR = HS / 8;
    for (int idx = threadIdx.x; idx < SDC_ATT_TILE * VPR; idx += SDC_ATT_THREADS) {
        const int r = idx / VPR, c = (idx % VPR) * 8;
        *reinterpret_cast<uint4 *>(dst + r * LDH + c) = *reinterpret_cast<const uint4 *>(src + (size_t)r * ld + c);
    }
}

/* Writes a warp's 16 x HS fp32 tile (smem, row length SDC_ATT_LDS) as bf16 rows ld apart. */
template <int HS>
static __device__ __forceinline__ void sdc_att_store_rows(bf16 *dst, size_t ld, const float *tile, int lane) {
    const int r = lane >> 1, c0 = (lane & 1) * (HS / 2);
#pragma unroll
    for (int c = 0; c < HS / 2; c += 8) {
        float f[8];
#pragma unroll
        for (int k = 0; k < 8; k++) f[k] = tile[r * SDC_ATT_LDS + c0 + c + k];
        sdb_store8(dst + (size_t)r * ld + c0 + c, f);
    }
}

template <int HS>
static size_t sdc_att_fwd_smem() {
    return (size_t)3 * SDC_ATT_TILE * (HS + 8) * sizeof(bf16) +
           (size_t)SDC_ATT_WARPS * 16 * SDC_ATT_LDS * sizeof(float) +
           (size_t)SDC_ATT_WARPS * 16 * SDC_ATT_LDP * sizeof(bf16);
}

template <int HS>
__global__ void __launch_bounds__(SDC_ATT_THREADS)
    sdc_att_fwd_kernel(bf16 *__restrict__ out, float *__restrict__ lse, const sdc_att_io io, int T,
                       float scale_log2) {
    constexpr int LDH = HS + 8;
    extern __shared__ __align__(128) float4 sdc_att_smem[]; /* wmma wants 32-byte aligned tiles */
    bf16 *sQ = reinterpret_cast<bf16 *>(sdc_att_smem);
    bf16 *sK = sQ + SDC_ATT_TILE * LDH;
    bf16 *sV = sK + SDC_ATT_TILE * LDH;
    float *sS = reinterpret_cast<float *>(sV + SDC_ATT_TILE * LDH);
    bf16 *sP = reinterpret_cast<bf16 *>(sS + SDC_ATT_WARPS * 16 * SDC_ATT_LDS);

    const int qt = gridDim.x - 1 - blockIdx.x;
    const int NH = io.NH, C = NH * HS;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / io.grp;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t ldq = (size_t)io.ldq, ldkv = (size_t)io.ldkv;
    float *myS = sS + warp * 16 * SDC_ATT_LDS;
    bf16 *myP = sP + warp * 16 * SDC_ATT_LDP;

    sdc_att_load_tile<HS>(sQ, io.q + ((size_t)b * T + (size_t)qt * SDC_ATT_TILE) * ldq + h * HS, ldq);
    __syncthreads();
    sdc_frag_a qf[HS / 16];
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) wmma::load_matrix_sync(qf[kk], sQ + warp * 16 * LDH + kk * 16, LDH);

    const int r = lane >> 1, half = lane & 1;
    const int qrow = qt * SDC_ATT_TILE + warp * 16 + r;
    float o[HS / 2];
#pragma unroll
    for (int d = 0; d < HS / 2; d++) o[d] = 0.f;
    float m_run = -INFINITY, l_run = 0.f;

    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads(); /* every warp is done with the previous K and V */
        const size_t kv = ((size_t)b * T + (size_t)kt * SDC_ATT_TILE) * ldkv + kvh * HS;
        sdc_att_load_tile<HS>(sK, io.k + kv, ldkv);
        sdc_att_load_tile<HS>(sV, io.v + kv, ldkv);
        __syncthreads();
#pragma unroll
        for (int nt = 0; nt < SDC_ATT_TILE / 16; nt++) {
            sdc_frag_c sf;
            wmma::fill_fragment(sf, 0.f);
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
                sdc_frag_b_col kf;
                wmma::load_matrix_sync(kf, sK + nt * 16 * LDH + kk * 16, LDH);
                wmma::mma_sync(sf, qf[kk], kf, sf);
            }
            wmma::store_matrix_sync(myS + nt * 16, sf, SDC_ATT_LDS, wmma::mem_row_major);
        }
        __syncwarp();
        float sv[32];
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            const int col = half * 32 + j;
            float x = myS[r * SDC_ATT_LDS + col] * scale_log2;
            if (kt * SDC_ATT_TILE + col > qrow) x = -INFINITY;
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
            myP[r * SDC_ATT_LDP + half * 32 + j] = pb;
        }
        ps += __shfl_xor_sync(0xffffffffu, ps, 1);
        l_run = l_run * alpha + ps;
        m_run = m_new;
#pragma unroll
        for (int d = 0; d < HS / 2; d++) o[d] *= alpha;
        __syncwarp();
#pragma unroll
        for (int nt = 0; nt < HS / 16; nt++) {
            sdc_frag_c pf;
            wmma::fill_fragment(pf, 0.f);
#pragma unroll
            for (int kk = 0; kk < SDC_ATT_TILE / 16; kk++) {
                sdc_frag_a pa;
                sdc_frag_b_row vb;
                wmma::load_matrix_sync(pa, myP + kk * 16, SDC_ATT_LDP);
                wmma::load_matrix_sync(vb, sV + kk * 16 * LDH + nt * 16, LDH);
                wmma::mma_sync(pf, pa, vb, pf);
            }
            wmma::store_matrix_sync(myS + nt * 16, pf, SDC_ATT_LDS, wmma::mem_row_major);
        }
        __syncwarp();
#pragma unroll
        for (int d = 0; d < HS / 2; d++) o[d] += myS[r * SDC_ATT_LDS + half * (HS / 2) + d];
        __syncwarp();
    }
    const float inv = 1.f / l_run;
    bf16 *op = out + ((size_t)b * T + qrow) * C + h * HS + half * (HS / 2);
#pragma unroll
    for (int d = 0; d < HS / 2; d += 8) {
        float f[8];
#pragma unroll
        for (int k = 0; k < 8; k++) f[k] = o[d + k] * inv;
        sdb_store8(op + d, f);
    }
    if (half == 0) lse[(size_t)bh * T + qrow] = (m_run + log2f(l_run)) * SDC_ATT_LN2;
}

/* D[(b*NH + h)*T + t] = sum_d dout[b,t,h*HS+d] * out[b,t,h*HS+d]. */
__global__ void sdc_att_bwd_pre_kernel(float *__restrict__ D, const bf16 *__restrict__ dout,
                                       const bf16 *__restrict__ out, int B, int T, int C, int NH, int HS) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NH * T) return;
    const int t = idx % T, h = (idx / T) % NH, b = idx / (T * NH);
    const size_t off = ((size_t)b * T + t) * C + (size_t)h * HS;
    float s = 0.f;
    for (int d = 0; d < HS; d += 8) {
        float x[8], y[8];
        sdb_load8(dout + off + d, x);
        sdb_load8(out + off + d, y);
#pragma unroll
        for (int k = 0; k < 8; k++) s += x[k] * y[k];
    }
    D[idx] = s;
}

template <int HS>
static size_t sdc_att_bkv_smem() {
    return (size_t)4 * SDC_ATT_TILE * (HS + 8) * sizeof(bf16) + (size_t)2 * SDC_ATT_TILE * sizeof(float) +
           (size_t)SDC_ATT_WARPS * 16 * (2 * SDC_ATT_LDS * sizeof(float) + 2 * SDC_ATT_LDP * sizeof(bf16));
}

template <int HS>
__global__ void __launch_bounds__(SDC_ATT_THREADS)
    sdc_att_bwd_kv_kernel(const bf16 *__restrict__ dout, const sdc_att_io io, const float *__restrict__ lse,
                          const float *__restrict__ D, int T, float scale_log2, float scale) {
    constexpr int LDH = HS + 8;
    extern __shared__ __align__(128) float4 sdc_att_smem[]; /* wmma wants 32-byte aligned tiles */
    bf16 *sK = reinterpret_cast<bf16 *>(sdc_att_smem);
    bf16 *sV = sK + SDC_ATT_TILE * LDH;
    bf16 *sQ = sV + SDC_ATT_TILE * LDH;
    bf16 *sO = sQ + SDC_ATT_TILE * LDH; /* dout */
    float *sL = reinterpret_cast<float *>(sO + SDC_ATT_TILE * LDH); /* lse * log2(e) */
    float *sD = sL + SDC_ATT_TILE;
    float *sS = sD + SDC_ATT_TILE;                           /* [warps][16][LDS] */
    float *sdP = sS + SDC_ATT_WARPS * 16 * SDC_ATT_LDS;      /* [warps][16][LDS] */
    bf16 *sP = reinterpret_cast<bf16 *>(sdP + SDC_ATT_WARPS * 16 * SDC_ATT_LDS); /* [warps][16][LDP] */
    bf16 *sdS = sP + SDC_ATT_WARPS * 16 * SDC_ATT_LDP;

    const int kt = blockIdx.x;
    const int nT = T / SDC_ATT_TILE;
    const int NH = io.NH, grp = io.grp, KVH = NH / grp, C = NH * HS;
    const int bkv = blockIdx.y, b = bkv / KVH, kvh = bkv % KVH;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t ldq = (size_t)io.ldq, ldkv = (size_t)io.ldkv;
    const bf16 *dbase = dout + (size_t)b * T * C;
    float *myS = sS + warp * 16 * SDC_ATT_LDS;
    float *mydP = sdP + warp * 16 * SDC_ATT_LDS;
    bf16 *myP = sP + warp * 16 * SDC_ATT_LDP;
    bf16 *mydS = sdS + warp * 16 * SDC_ATT_LDP;

    const size_t kvrows = ((size_t)b * T + (size_t)kt * SDC_ATT_TILE) * ldkv + kvh * HS;
    sdc_att_load_tile<HS>(sK, io.k + kvrows, ldkv);
    sdc_att_load_tile<HS>(sV, io.v + kvrows, ldkv);
    __syncthreads();
    sdc_frag_a kf[HS / 16], vf[HS / 16];
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        wmma::load_matrix_sync(kf[kk], sK + warp * 16 * LDH + kk * 16, LDH);
        wmma::load_matrix_sync(vf[kk], sV + warp * 16 * LDH + kk * 16, LDH);
    }
    sdc_frag_c dk[HS / 16], dv[HS / 16];
#pragma unroll
    for (int nt = 0; nt < HS / 16; nt++) {
        wmma::fill_fragment(dk[nt], 0.f);
        wmma::fill_fragment(dv[nt], 0.f);
    }
    const int r = lane >> 1, half = lane & 1;
    const int key = kt * SDC_ATT_TILE + warp * 16 + r;

    for (int it = 0; it < grp * (nT - kt); it++) { /* the group's query heads in order, each over qt = kt..nT-1 */
        const int h = kvh * grp + it / (nT - kt), qt = kt + it % (nT - kt), bh = b * NH + h;
        __syncthreads(); /* every warp is done with the previous Q and dO */
        sdc_att_load_tile<HS>(sQ, io.q + ((size_t)b * T + (size_t)qt * SDC_ATT_TILE) * ldq + h * HS, ldq);
        sdc_att_load_tile<HS>(sO, dbase + (size_t)qt * SDC_ATT_TILE * C + h * HS, (size_t)C);
        for (int i = threadIdx.x; i < SDC_ATT_TILE; i += SDC_ATT_THREADS) {
            const size_t row = (size_t)bh * T + qt * SDC_ATT_TILE + i;
            sL[i] = lse[row] * SDC_ATT_LOG2E;
            sD[i] = D[row];
        }
        __syncthreads();
#pragma unroll
        for (int nt = 0; nt < SDC_ATT_TILE / 16; nt++) {
            sdc_frag_c sf, pf;
            wmma::fill_fragment(sf, 0.f);
            wmma::fill_fragment(pf, 0.f);
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
                sdc_frag_b_col qb, ob;
                wmma::load_matrix_sync(qb, sQ + nt * 16 * LDH + kk * 16, LDH);
                wmma::mma_sync(sf, kf[kk], qb, sf);
                wmma::load_matrix_sync(ob, sO + nt * 16 * LDH + kk * 16, LDH);
                wmma::mma_sync(pf, vf[kk], ob, pf);
            }
            wmma::store_matrix_sync(myS + nt * 16, sf, SDC_ATT_LDS, wmma::mem_row_major);
            wmma::store_matrix_sync(mydP + nt * 16, pf, SDC_ATT_LDS, wmma::mem_row_major);
        }
        __syncwarp();
#pragma unroll 8
        for (int j = 0; j < 32; j++) {
            const int col = half * 32 + j;
            const int q = qt * SDC_ATT_TILE + col;
            float p = 0.f;
            if (q >= key) p = exp2f(myS[r * SDC_ATT_LDS + col] * scale_log2 - sL[col]);
            const float ds = p * (mydP[r * SDC_ATT_LDS + col] - sD[col]) * scale;
            myP[r * SDC_ATT_LDP + col] = __float2bfloat16(p);
            mydS[r * SDC_ATT_LDP + col] = __float2bfloat16(ds);
        }
        __syncwarp();
#pragma unroll
        for (int nt = 0; nt < HS / 16; nt++) {
#pragma unroll
            for (int kk = 0; kk < SDC_ATT_TILE / 16; kk++) {
                sdc_frag_a pa, sa;
                sdc_frag_b_row ob, qb;
                wmma::load_matrix_sync(pa, myP + kk * 16, SDC_ATT_LDP);
                wmma::load_matrix_sync(ob, sO + kk * 16 * LDH + nt * 16, LDH);
                wmma::mma_sync(dv[nt], pa, ob, dv[nt]);
                wmma::load_matrix_sync(sa, mydS + kk * 16, SDC_ATT_LDP);
                wmma::load_matrix_sync(qb, sQ + kk * 16 * LDH + nt * 16, LDH);
                wmma::mma_sync(dk[nt], sa, qb, dk[nt]);
            }
        }
    }
    /* dK, then dV, through the warp's score tile (HS <= 64 columns). */
    const size_t drow = ((size_t)b * T + kt * SDC_ATT_TILE + warp * 16) * ldkv + kvh * HS;
    __syncwarp();
#pragma unroll
    for (int nt = 0; nt < HS / 16; nt++) wmma::store_matrix_sync(myS + nt * 16, dk[nt], SDC_ATT_LDS, wmma::mem_row_major);
    __syncwarp();
    sdc_att_store_rows<HS>(io.dk + drow, ldkv, myS, lane);
    __syncwarp();
#pragma unroll
    for (int nt = 0; nt < HS / 16; nt++) wmma::store_matrix_sync(myS + nt * 16, dv[nt], SDC_ATT_LDS, wmma::mem_row_major);
    __syncwarp();
    sdc_att_store_rows<HS>(io.dv + drow, ldkv, myS, lane);
}

template <int HS>
static size_t sdc_att_bq_smem() {
    return (size_t)4 * SDC_ATT_TILE * (HS + 8) * sizeof(bf16) +
           (size_t)SDC_ATT_WARPS * 16 * (2 * SDC_ATT_LDS * sizeof(float) + SDC_ATT_LDP * sizeof(bf16));
}

template <int HS>
__global__ void __launch_bounds__(SDC_ATT_THREADS)
    sdc_att_bwd_q_kernel(const bf16 *__restrict__ dout, const sdc_att_io io, const float *__restrict__ lse,
                         const float *__restrict__ D, int T, float scale_log2, float scale) {
    constexpr int LDH = HS + 8;
    extern __shared__ __align__(128) float4 sdc_att_smem[]; /* wmma wants 32-byte aligned tiles */
    bf16 *sQ = reinterpret_cast<bf16 *>(sdc_att_smem);
    bf16 *sO = sQ + SDC_ATT_TILE * LDH; /* dout */
    bf16 *sK = sO + SDC_ATT_TILE * LDH;
    bf16 *sV = sK + SDC_ATT_TILE * LDH;
    float *sS = reinterpret_cast<float *>(sV + SDC_ATT_TILE * LDH);
    float *sdP = sS + SDC_ATT_WARPS * 16 * SDC_ATT_LDS;
    bf16 *sdS = reinterpret_cast<bf16 *>(sdP + SDC_ATT_WARPS * 16 * SDC_ATT_LDS);

    const int qt = gridDim.x - 1 - blockIdx.x;
    const int NH = io.NH, C = NH * HS;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / io.grp;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t ldq = (size_t)io.ldq, ldkv = (size_t)io.ldkv;
    float *myS = sS + warp * 16 * SDC_ATT_LDS;
    float *mydP = sdP + warp * 16 * SDC_ATT_LDS;
    bf16 *mydS = sdS + warp * 16 * SDC_ATT_LDP;

    sdc_att_load_tile<HS>(sQ, io.q + ((size_t)b * T + (size_t)qt * SDC_ATT_TILE) * ldq + h * HS, ldq);
    sdc_att_load_tile<HS>(sO, dout + ((size_t)b * T + (size_t)qt * SDC_ATT_TILE) * C + h * HS, (size_t)C);
    __syncthreads();
    sdc_frag_a qf[HS / 16], of[HS / 16];
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        wmma::load_matrix_sync(qf[kk], sQ + warp * 16 * LDH + kk * 16, LDH);
        wmma::load_matrix_sync(of[kk], sO + warp * 16 * LDH + kk * 16, LDH);
    }
    sdc_frag_c dq[HS / 16];
#pragma unroll
    for (int nt = 0; nt < HS / 16; nt++) wmma::fill_fragment(dq[nt], 0.f);
    const int r = lane >> 1, half = lane & 1;
    const int qrow = qt * SDC_ATT_TILE + warp * 16 + r;
    const float lrow = lse[(size_t)bh * T + qrow] * SDC_ATT_LOG2E;
    const float drow = D[(size_t)bh * T + qrow];

    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads();
        const size_t kv = ((size_t)b * T + (size_t)kt * SDC_ATT_TILE) * ldkv + kvh * HS;
        sdc_att_load_tile<HS>(sK, io.k + kv, ldkv);
        sdc_att_load_tile<HS>(sV, io.v + kv, ldkv);
        __syncthreads();
#pragma unroll
        for (int nt = 0; nt < SDC_ATT_TILE / 16; nt++) {
            sdc_frag_c sf, pf;
            wmma::fill_fragment(sf, 0.f);
            wmma::fill_fragment(pf, 0.f);
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
                sdc_frag_b_col kb, vb;
                wmma::load_matrix_sync(kb, sK + nt * 16 * LDH + kk * 16, LDH);
                wmma::mma_sync(sf, qf[kk], kb, sf);
                wmma::load_matrix_sync(vb, sV + nt * 16 * LDH + kk * 16, LDH);
                wmma::mma_sync(pf, of[kk], vb, pf);
            }
            wmma::store_matrix_sync(myS + nt * 16, sf, SDC_ATT_LDS, wmma::mem_row_major);
            wmma::store_matrix_sync(mydP + nt * 16, pf, SDC_ATT_LDS, wmma::mem_row_major);
        }
        __syncwarp();
#pragma unroll 8
        for (int j = 0; j < 32; j++) {
            const int col = half * 32 + j;
            float p = 0.f;
            if (kt * SDC_ATT_TILE + col <= qrow) p = exp2f(myS[r * SDC_ATT_LDS + col] * scale_log2 - lrow);
            mydS[r * SDC_ATT_LDP + col] = __float2bfloat16(p * (mydP[r * SDC_ATT_LDS + col] - drow) * scale);
        }
        __syncwarp();
#pragma unroll
        for (int nt = 0; nt < HS / 16; nt++) {
#pragma unroll
            for (int kk = 0; kk < SDC_ATT_TILE / 16; kk++) {
                sdc_frag_a sa;
                sdc_frag_b_row kb;
                wmma::load_matrix_sync(sa, mydS + kk * 16, SDC_ATT_LDP);
                wmma::load_matrix_sync(kb, sK + kk * 16 * LDH + nt * 16, LDH);
                wmma::mma_sync(dq[nt], sa, kb, dq[nt]);
            }
        }
    }
    __syncwarp();
#pragma unroll
    for (int nt = 0; nt < HS / 16; nt++) wmma::store_matrix_sync(myS + nt * 16, dq[nt], SDC_ATT_LDS, wmma::mem_row_major);
    __syncwarp();
    sdc_att_store_rows<HS>(io.dq + ((size_t)b * T + qt * SDC_ATT_TILE + warp * 16) * ldq + h * HS, ldq, myS, lane);
}

/* Raises a kernel's dynamic shared memory limit to bytes (once per kernel). */
static int sdc_att_smem_attr(const void *kernel, size_t bytes, int *done) {
    if (*done) return SD_OK;
    SD_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    *done = 1;
    return SD_OK;
}

template <int HS>
static int sdc_att_forward_hs(bf16 *out, float *lse, const sdc_att_io &io, int B, int T, cudaStream_t s) {
    static int done = 0;
    const size_t smem = sdc_att_fwd_smem<HS>();
    int rc = sdc_att_smem_attr((const void *)sdc_att_fwd_kernel<HS>, smem, &done);
    if (rc != SD_OK) return rc;
    const float scale_log2 = SDC_ATT_LOG2E / sqrtf((float)HS);
    dim3 grid((unsigned)(T / SDC_ATT_TILE), (unsigned)(B * io.NH));
    sdc_att_fwd_kernel<HS><<<grid, SDC_ATT_THREADS, smem, s>>>(out, lse, io, T, scale_log2);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

template <int HS>
static int sdc_att_backward_hs(const sdc_att_io &io, const bf16 *dout, const float *lse, const float *D, int B, int T,
                               cudaStream_t s) {
    static int done_kv = 0, done_q = 0;
    const size_t smem_kv = sdc_att_bkv_smem<HS>(), smem_q = sdc_att_bq_smem<HS>();
    int rc = sdc_att_smem_attr((const void *)sdc_att_bwd_kv_kernel<HS>, smem_kv, &done_kv);
    if (rc != SD_OK) return rc;
    rc = sdc_att_smem_attr((const void *)sdc_att_bwd_q_kernel<HS>, smem_q, &done_q);
    if (rc != SD_OK) return rc;
    const float scale = 1.f / sqrtf((float)HS);
    const float scale_log2 = scale * SDC_ATT_LOG2E;
    const unsigned tiles = (unsigned)(T / SDC_ATT_TILE);
    sdc_att_bwd_kv_kernel<HS><<<dim3(tiles, (unsigned)(B * (io.NH / io.grp))), SDC_ATT_THREADS, smem_kv, s>>>(
        dout, io, lse, D, T, scale_log2, scale);
    SD_CUDA(cudaGetLastError());
    sdc_att_bwd_q_kernel<HS><<<dim3(tiles, (unsigned)(B * io.NH)), SDC_ATT_THREADS, smem_q, s>>>(dout, io, lse, D, T,
                                                                                              scale_log2, scale);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/* The wmma forward on io (checked by the caller: HS 32 or 64). */
int sdc_att_forward_io(void *out, float *lse, const sdc_att_io &io, int B, int T, int HS, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (HS == 64) return sdc_att_forward_hs<64>((bf16 *)out, lse, io, B, T, s);
    return sdc_att_forward_hs<32>((bf16 *)out, lse, io, B, T, s);
}

/* The wmma backward on io (checked by the caller: HS 32 or 64): D, then dK
 * and dV, then dQ. */
int sdc_att_backward_io(const sdc_att_io &io, const void *dout, const void *out, const float *lse, int B, int T,
                        int HS, void *scratch, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    float *D = (float *)scratch;
    const int NH = io.NH, rows = B * NH * T;
    sdc_att_bwd_pre_kernel<<<(rows + 255) / 256, 256, 0, s>>>(D, (const bf16 *)dout, (const bf16 *)out, B, T, NH * HS,
                                                              NH, HS);
    SD_CUDA(cudaGetLastError());
    if (HS == 64) return sdc_att_backward_hs<64>(io, (const bf16 *)dout, lse, D, B, T, s);
    return sdc_att_backward_hs<32>(io, (const bf16 *)dout, lse, D, B, T, s);
}

