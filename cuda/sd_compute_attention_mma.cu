/*
 * sd_compute_attention_mma.cu: the bf16 causal self-attention for head size
 * 64 on mma.sync.m16n8k16 bf16 tensor-core instructions (fp32
 * accumulation), the scores and the online softmax kept in registers,
 * operands read from shared memory with ldmatrix, tiles brought in by
 * cp.async, double buffered: SDC_ATTN_MMA of sdc_attention_bf16 and
 * sdc_grouped_attention_bf16 (symddp_compute.h; their launchers, which
 * check the arguments, are in sd_compute_attention.cu). The wmma kernels of
 * sd_compute_attention_wmma.cu are the reference and the fallback (other
 * head sizes, T not a multiple of 128).
 *
 * Fragments (PTX ISA, mma.m16n8k16 bf16; g = lane/4, c = lane%4):
 *   A 16x16 row-major: a0 (g, 2c..2c+1), a1 (g+8, 2c..), a2 (g, 8+2c..), a3 (g+8, 8+2c..);
 *   B 16x8: b0 (k 2c..2c+1, n g), b1 (k 8+2c.., n g);  C 16x8: c0,c1 (g, 2c..), c2,c3 (g+8, 2c..).
 * A score accumulator pair (n-tiles 2s, 2s+1) is, packed to bf16, the A
 * fragment of k-step s of the next product (P V, P^T dO, dS^T Q), so P never
 * goes through shared memory (dS^T does, on its way to the dQ kernel). Shared
 * tiles are rows of 64 bf16 padded to 72 (144 bytes), so that the 8 rows an
 * ldmatrix reads fall in distinct banks.
 * B operands: a tile stored [n][k] (K for Q K^T) is read by plain ldmatrix, a
 * tile stored [k][n] (V for P V) by ldmatrix.trans.
 *
 * forward (grid (T/128, B*NH), last query tiles first; 4 warps, 32 query rows
 * each, 2 m-tiles): for each 64-key tile up to the diagonal: S = Q K^T (Q's
 * fragments in registers), mask on the two diagonal tiles, x = S * scale *
 * log2(e), running max m and sum l per row (in log2 units), O = O * 2^(m_old -
 * m_new) + P V with P = 2^(x - m_new) rounded to bf16. out = O / l,
 * lse = (m + log2 l) ln 2. l sums the fp32 P. 2^x is the SFU's ex2 with
 * denormal results flushed to zero, and x = s * scale log2(e) - m one FFMA.
 * backward, deterministic, no float atomics:
 *   D = rowsum(dout * out) (one thread per row);
 *   dK/dV (grid (T/64, B*NH), 4 warps x 16 keys, loop over 64-query tiles >=
 *   the key tile): S^T = K Q^T, dP^T = V dO^T, P^T = 2^(S^T scale log2e -
 *   lse log2e), dS^T = P^T (dP^T - D) scale; dV += P^T dO, dK += dS^T Q;
 *   dS^T of each tile pair is also written, as bf16, to the scratch;
 *   dQ (grid (T/64, B*NH), 4 warps x 16 queries, loop over key tiles <= the
 *   query tile): dQ += dS K from the stored dS^T: one product per tile pair
 *   instead of three (S, dP and dS K again), for B*NH*T*(T+64)/2 bf16 of
 *   scratch (213 MB at GPT-2's B=16).
 *   P and dS are rounded to bf16 for their products, as in the wmma kernels.
 * Every output element is summed in a fixed order: the bits repeat.
 * Grouped-query attention (sdc_grouped_attention_bf16, an sdc_att_io of
 * sd_compute_attention.cuh): query head h reads key/value head h/grp; the
 * dK/dV block of a key tile and a key/value head loops over its grp query
 * heads in order, each over its query tiles, so a key/value head's gradient
 * sums its group's query heads in registers, in a fixed order, with no
 * atomics (for grp = 1, GPT-2's packed qkv, the loop of before).
 */
#include <math.h>

#include "sd_compute_attention.cuh"

#define SDC_AM_HS 64
#define SDC_AM_LD 72 /* padded smem row, bf16 */
#define SDC_AM_BM 128
#define SDC_AM_BN 64
#define SDC_AM_THREADS 128
#define SDC_AM_LOG2E 1.4426950408889634f
#define SDC_AM_LN2 0.6931471805599453f

static __device__ __forceinline__ uint32_t sdc_am_smem(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}


static __device__ __forceinline__ void sdc_am_ldsm4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3,
                                                    const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(sdc_am_smem(p)));
}
static __device__ __forceinline__ void sdc_am_ldsm4t(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3,
                                                     const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(sdc_am_smem(p)));
}

/* c += a b (m16n8k16, bf16 in, fp32 accumulate) */
static __device__ __forceinline__ void sdc_am_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* two floats as bf16x2: lo in the low half (the lower column) */
static __device__ __forceinline__ uint32_t sdc_am_pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

/* 2^x on the special-function unit, denormal results flushed to zero (exp2f
 * adds a range fix-up of three instructions around it without -ftz) */
static __device__ __forceinline__ float sdc_am_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* rows [0,rows) of 64 bf16 from global (rows ld apart) into a padded smem tile, by all threads */
template <int ROWS>
static __device__ __forceinline__ void sdc_am_load(bf16 *dst, const bf16 *src, size_t ld) {
    for (int i = threadIdx.x; i < ROWS * 8; i += SDC_AM_THREADS) {
        const int r = i >> 3, c = (i & 7) * 8;
        sdc_cp16(dst + r * SDC_AM_LD + c, src + (size_t)r * ld + c);
    }
}

/* A fragments of a 16 x 64 tile (rows row0.., smem [row][d]): f[ks] for d 16ks..16ks+15 */
static __device__ __forceinline__ void sdc_am_frag_a(uint32_t f[4][4], const bf16 *tile, int row0, int lane) {
#pragma unroll
    for (int ks = 0; ks < 4; ks++)
        sdc_am_ldsm4(f[ks][0], f[ks][1], f[ks][2], f[ks][3],
                     tile + (row0 + (lane & 15)) * SDC_AM_LD + ks * 16 + (lane >> 4) * 8);
}

/* B fragments, tile stored [n][k] (64 k): n rows n0..n0+7; b[2ks], b[2ks+1] for k-step ks */
static __device__ __forceinline__ void sdc_am_frag_b_nk(uint32_t b[8], const bf16 *tile, int n0, int lane) {
    const bf16 *p = tile + (n0 + (lane & 7)) * SDC_AM_LD + (lane >> 3) * 8;
    sdc_am_ldsm4(b[0], b[1], b[2], b[3], p);
    sdc_am_ldsm4(b[4], b[5], b[6], b[7], p + 32);
}

/* B fragments, tile stored [k][n]: k rows k0..k0+15, n columns n0..n0+15:
 * (r0, r1) the n-tile n0..n0+7, (r2, r3) the n-tile n0+8.. */
static __device__ __forceinline__ void sdc_am_frag_b_kn(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3,
                                                        const bf16 *tile, int k0, int n0, int lane) {
    sdc_am_ldsm4t(r0, r1, r2, r3, tile + (k0 + (lane & 15)) * SDC_AM_LD + n0 + (lane >> 4) * 8);
}

/* ================= forward ================= */
static const size_t sdc_am_fwd_smem = (size_t)(SDC_AM_BM + 4 * SDC_AM_BN) * SDC_AM_LD * sizeof(bf16);

__global__ void __launch_bounds__(SDC_AM_THREADS, 2)
    sdc_am_fwd_kernel(bf16 *__restrict__ out, float *__restrict__ lse, const sdc_att_io io, int T, float scale_log2) {
    extern __shared__ __align__(128) unsigned char sdc_am_sm[];
    bf16 *sQ = reinterpret_cast<bf16 *>(sdc_am_sm);  /* [128][LD] */
    bf16 *sK = sQ + SDC_AM_BM * SDC_AM_LD;            /* [2][64][LD] */
    bf16 *sV = sK + 2 * SDC_AM_BN * SDC_AM_LD;        /* [2][64][LD] */
    const int qt = gridDim.x - 1 - blockIdx.x;
    const int NH = io.NH, C = NH * SDC_AM_HS;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / io.grp;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const size_t ldq = (size_t)io.ldq, ldkv = (size_t)io.ldkv;
    const bf16 *qbase = io.q + (size_t)b * T * ldq + h * SDC_AM_HS;
    const bf16 *kbase = io.k + (size_t)b * T * ldkv + kvh * SDC_AM_HS;
    const bf16 *vbase = io.v + (size_t)b * T * ldkv + kvh * SDC_AM_HS;
    const int q0 = qt * SDC_AM_BM;
    const int nk = (q0 + SDC_AM_BM) / SDC_AM_BN; /* key tiles 0..nk-1 */

    sdc_am_load<SDC_AM_BM>(sQ, qbase + (size_t)q0 * ldq, ldq);
    sdc_am_load<SDC_AM_BN>(sK, kbase, ldkv);
    sdc_am_load<SDC_AM_BN>(sV, vbase, ldkv);
    sdc_cp_commit();

    uint32_t qf[2][4][4];
    float o[2][8][4];
    float m[2][2], l[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) o[mt][j][e] = 0.f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
    }
    const int wrow = q0 + warp * 32; /* the warp's first query */

    for (int kt = 0; kt < nk; kt++) {
        if (kt + 1 < nk) {
            const int nb = (kt + 1) & 1;
            const size_t kr = (size_t)(kt + 1) * SDC_AM_BN * ldkv;
            sdc_am_load<SDC_AM_BN>(sK + nb * SDC_AM_BN * SDC_AM_LD, kbase + kr, ldkv);
            sdc_am_load<SDC_AM_BN>(sV + nb * SDC_AM_BN * SDC_AM_LD, vbase + kr, ldkv);
            sdc_cp_commit();
            sdc_cp_wait<1>();
        } else {
            sdc_cp_wait<0>();
        }
        __syncthreads();
        if (kt == 0) {
#pragma unroll
            for (int mt = 0; mt < 2; mt++) sdc_am_frag_a(qf[mt], sQ, warp * 32 + mt * 16, lane);
        }
        const bf16 *tK = sK + (kt & 1) * SDC_AM_BN * SDC_AM_LD;
        const bf16 *tV = sV + (kt & 1) * SDC_AM_BN * SDC_AM_LD;
        const int k0 = kt * SDC_AM_BN;
        if (k0 <= wrow + 31) { /* else every key of the tile is after the warp's queries */
            float s[2][8][4];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int j = 0; j < 8; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) s[mt][j][e] = 0.f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint32_t bk[8];
                sdc_am_frag_b_nk(bk, tK, 8 * j, lane);
#pragma unroll
                for (int mt = 0; mt < 2; mt++)
#pragma unroll
                    for (int ks = 0; ks < 4; ks++) sdc_am_mma(s[mt][j], qf[mt][ks], bk[2 * ks], bk[2 * ks + 1]);
            }
            const bool diag = k0 + SDC_AM_BN - 1 > wrow; /* some key after some query of the warp */
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
#pragma unroll
                for (int hf = 0; hf < 2; hf++) {
                    const int row = wrow + mt * 16 + g + 8 * hf;
                    float mx = -INFINITY; /* of the raw scores: scale_log2 > 0 keeps the order */
#pragma unroll
                    for (int j = 0; j < 8; j++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            if (diag && k0 + 8 * j + 2 * c + e > row) s[mt][j][2 * hf + e] = -INFINITY;
                            mx = fmaxf(mx, s[mt][j][2 * hf + e]);
                        }
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                    /* finite: key 0 <= every query */
                    const float mn = fmaxf(m[mt][hf], mx * scale_log2);
                    const float alpha = sdc_am_ex2(m[mt][hf] - mn);
                    float ps = 0.f;
#pragma unroll
                    for (int j = 0; j < 8; j++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            const float p = sdc_am_ex2(fmaf(s[mt][j][2 * hf + e], scale_log2, -mn));
                            s[mt][j][2 * hf + e] = p;
                            ps += p;
                        }
                    l[mt][hf] = l[mt][hf] * alpha + ps;
                    m[mt][hf] = mn;
#pragma unroll
                    for (int j = 0; j < 8; j++) {
                        o[mt][j][2 * hf] *= alpha;
                        o[mt][j][2 * hf + 1] *= alpha;
                    }
                }
            }
            /* O += P V */
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                uint32_t pa[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    pa[mt][0] = sdc_am_pack(s[mt][2 * ks][0], s[mt][2 * ks][1]);
                    pa[mt][1] = sdc_am_pack(s[mt][2 * ks][2], s[mt][2 * ks][3]);
                    pa[mt][2] = sdc_am_pack(s[mt][2 * ks + 1][0], s[mt][2 * ks + 1][1]);
                    pa[mt][3] = sdc_am_pack(s[mt][2 * ks + 1][2], s[mt][2 * ks + 1][3]);
                }
#pragma unroll
                for (int jj = 0; jj < 4; jj++) {
                    uint32_t v0, v1, v2, v3;
                    sdc_am_frag_b_kn(v0, v1, v2, v3, tV, 16 * ks, 16 * jj, lane);
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        sdc_am_mma(o[mt][2 * jj], pa[mt], v0, v1);
                        sdc_am_mma(o[mt][2 * jj + 1], pa[mt], v2, v3);
                    }
                }
            }
        }
        __syncthreads(); /* the buffer is refilled by the next iteration's loads */
    }
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {
            float lt = l[mt][hf];
            lt += __shfl_xor_sync(0xffffffffu, lt, 1);
            lt += __shfl_xor_sync(0xffffffffu, lt, 2);
            const float inv = 1.f / lt;
            const int row = wrow + mt * 16 + g + 8 * hf;
            bf16 *op = out + ((size_t)b * T + row) * C + h * SDC_AM_HS + 2 * c;
#pragma unroll
            for (int j = 0; j < 8; j++)
                *reinterpret_cast<__nv_bfloat162 *>(op + 8 * j) =
                    __floats2bfloat162_rn(o[mt][j][2 * hf] * inv, o[mt][j][2 * hf + 1] * inv);
            if (c == 0) lse[(size_t)bh * T + row] = (m[mt][hf] + log2f(lt)) * SDC_AM_LN2;
        }
    }
}

/* ================= backward ================= */
/* D[(b*NH + h)*T + t] = sum_d dout * out over the head's 64 columns; one thread per row. */
__global__ void sdc_am_pre_kernel(float *__restrict__ D, const bf16 *__restrict__ dout, const bf16 *__restrict__ out,
                                  int B, int T, int C, int NH) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NH * T) return;
    const int t = idx % T, h = (idx / T) % NH, b = idx / (T * NH);
    const size_t off = ((size_t)b * T + t) * C + (size_t)h * SDC_AM_HS;
    float s = 0.f;
#pragma unroll
    for (int d = 0; d < SDC_AM_HS; d += 8) {
        float x[8], y[8];
        sdb_load8(dout + off + d, x);
        sdb_load8(out + off + d, y);
#pragma unroll
        for (int k = 0; k < 8; k++) s += x[k] * y[k];
    }
    D[idx] = s;
}

/* dK and dV: the block of key tile kt (4 warps x 16 keys) loops over the
 * query tiles qt >= kt. It also writes dS^T of every (kt, qt) tile pair,
 * rounded to bf16 as its products use it, to ds (the scratch: tile (qt, kt)
 * of head bh at bh * nT(nT+1)/2 + qt(qt+1)/2 + kt, 64 x 64 stored
 * [key][query]), through shared memory so that the stores are whole 16-byte
 * vectors; sdc_am_bwd_q_ds_kernel then needs one product per tile pair for
 * dQ instead of three (S and dP computed again, then dS K): 428 against 478
 * us at GPT-2's B=16 on the H200, the same bits.
 * smem: K, V, dS^T, Q x 2, dout x 2 tiles, lse*log2e and D x 2 */
static const size_t sdc_am_bwd_kv_smem =
    (size_t)7 * SDC_AM_BN * SDC_AM_LD * sizeof(bf16) + (size_t)4 * SDC_AM_BN * sizeof(float);

static __device__ __forceinline__ size_t sdc_am_ds_tile(int bh, int nT, int qt, int kt) {
    return ((size_t)bh * (nT * (nT + 1) / 2) + qt * (qt + 1) / 2 + kt) * SDC_AM_BN * SDC_AM_BN;
}

__global__ void __launch_bounds__(SDC_AM_THREADS)
    sdc_am_bwd_kv_kernel(bf16 *__restrict__ ds, const bf16 *__restrict__ dout, const sdc_att_io io,
                         const float *__restrict__ lse, const float *__restrict__ D, int T, float scale_log2,
                         float scale) {
    extern __shared__ __align__(128) unsigned char sdc_am_sm[];
    bf16 *sK = reinterpret_cast<bf16 *>(sdc_am_sm); /* [64][LD] */
    bf16 *sV = sK + SDC_AM_BN * SDC_AM_LD;
    bf16 *sQ = sV + SDC_AM_BN * SDC_AM_LD;          /* [2][64][LD] */
    bf16 *sO = sQ + 2 * SDC_AM_BN * SDC_AM_LD;      /* dout, [2][64][LD] */
    float *sL = reinterpret_cast<float *>(sO + 2 * SDC_AM_BN * SDC_AM_LD); /* [2][64] lse * log2e */
    float *sD = sL + 2 * SDC_AM_BN;                                         /* [2][64] */
    bf16 *sS = reinterpret_cast<bf16 *>(sD + 2 * SDC_AM_BN);                /* dS^T [key][query] */
    const int kt = blockIdx.x;
    const int nT = T / SDC_AM_BN;
    const int NH = io.NH, grp = io.grp, KVH = NH / grp, C = NH * SDC_AM_HS;
    const int bkv = blockIdx.y, b = bkv / KVH, kvh = bkv % KVH;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const size_t ldq = (size_t)io.ldq, ldkv = (size_t)io.ldkv;
    const int k0 = kt * SDC_AM_BN;
    /* the iterations: the group's query heads in order, each over the query tiles kt..nT-1 */
    const int nq = nT - kt, iters = grp * nq;

    sdc_am_load<SDC_AM_BN>(sK, io.k + ((size_t)b * T + k0) * ldkv + kvh * SDC_AM_HS, ldkv);
    sdc_am_load<SDC_AM_BN>(sV, io.v + ((size_t)b * T + k0) * ldkv + kvh * SDC_AM_HS, ldkv);
    auto load_q = [&](int it, int buf) {
        const int h = kvh * grp + it / nq, qt = kt + it % nq;
        const size_t bh = (size_t)b * NH + h;
        sdc_am_load<SDC_AM_BN>(sQ + buf * SDC_AM_BN * SDC_AM_LD,
                               io.q + ((size_t)b * T + qt * SDC_AM_BN) * ldq + h * SDC_AM_HS, ldq);
        sdc_am_load<SDC_AM_BN>(sO + buf * SDC_AM_BN * SDC_AM_LD,
                               dout + ((size_t)b * T + qt * SDC_AM_BN) * C + h * SDC_AM_HS, (size_t)C);
        for (int i = threadIdx.x; i < SDC_AM_BN; i += SDC_AM_THREADS) {
            const size_t row = bh * T + qt * SDC_AM_BN + i;
            sL[buf * SDC_AM_BN + i] = lse[row] * SDC_AM_LOG2E;
            sD[buf * SDC_AM_BN + i] = D[row];
        }
    };
    load_q(0, 0);
    sdc_cp_commit();

    uint32_t kf[4][4], vf[4][4];
    float dk[8][4], dv[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[j][e] = dv[j][e] = 0.f;
    const int key_lo = k0 + warp * 16 + g, key_hi = key_lo + 8; /* the thread's two keys (rows) */

    for (int it = 0; it < iters; it++) {
        const int qt = kt + it % nq, bh = b * NH + kvh * grp + it / nq;
        if (it + 1 < iters) {
            load_q(it + 1, (it + 1) & 1);
            sdc_cp_commit();
            sdc_cp_wait<1>();
        } else {
            sdc_cp_wait<0>();
        }
        __syncthreads();
        if (it == 0) {
            sdc_am_frag_a(kf, sK, warp * 16, lane);
            sdc_am_frag_a(vf, sV, warp * 16, lane);
        }
        const int buf = it & 1;
        const bf16 *tQ = sQ + buf * SDC_AM_BN * SDC_AM_LD, *tO = sO + buf * SDC_AM_BN * SDC_AM_LD;
        const float *tL = sL + buf * SDC_AM_BN, *tD = sD + buf * SDC_AM_BN;
        const int q0 = qt * SDC_AM_BN;
        /* S^T = K Q^T, dP^T = V dO^T: rows the warp's 16 keys, columns the 64 queries */
        float st[8][4], dpt[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) st[j][e] = dpt[j][e] = 0.f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t bq[8], bo[8];
            sdc_am_frag_b_nk(bq, tQ, 8 * j, lane);
            sdc_am_frag_b_nk(bo, tO, 8 * j, lane);
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                sdc_am_mma(st[j], kf[ks], bq[2 * ks], bq[2 * ks + 1]);
                sdc_am_mma(dpt[j], vf[ks], bo[2 * ks], bo[2 * ks + 1]);
            }
        }
        /* P^T and dS^T in place of S^T and dP^T */
        const bool diag = qt == kt;
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int col = 8 * j + 2 * c + (e & 1);
                const int key = (e & 2) ? key_hi : key_lo;
                float p = sdc_am_ex2(fmaf(st[j][e], scale_log2, -tL[col]));
                if (diag && q0 + col < key) p = 0.f;
                st[j][e] = p;
                dpt[j][e] = p * (dpt[j][e] - tD[col]) * scale;
            }
        /* dV += P^T dO, dK += dS^T Q: k-steps over the 64 queries */
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            uint32_t pa[4], sa[4];
            pa[0] = sdc_am_pack(st[2 * ks][0], st[2 * ks][1]);
            pa[1] = sdc_am_pack(st[2 * ks][2], st[2 * ks][3]);
            pa[2] = sdc_am_pack(st[2 * ks + 1][0], st[2 * ks + 1][1]);
            pa[3] = sdc_am_pack(st[2 * ks + 1][2], st[2 * ks + 1][3]);
            sa[0] = sdc_am_pack(dpt[2 * ks][0], dpt[2 * ks][1]);
            sa[1] = sdc_am_pack(dpt[2 * ks][2], dpt[2 * ks][3]);
            sa[2] = sdc_am_pack(dpt[2 * ks + 1][0], dpt[2 * ks + 1][1]);
            sa[3] = sdc_am_pack(dpt[2 * ks + 1][2], dpt[2 * ks + 1][3]);
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                uint32_t r0, r1, r2, r3;
                sdc_am_frag_b_kn(r0, r1, r2, r3, tO, 16 * ks, 16 * jj, lane);
                sdc_am_mma(dv[2 * jj], pa, r0, r1);
                sdc_am_mma(dv[2 * jj + 1], pa, r2, r3);
                sdc_am_frag_b_kn(r0, r1, r2, r3, tQ, 16 * ks, 16 * jj, lane);
                sdc_am_mma(dk[2 * jj], sa, r0, r1);
                sdc_am_mma(dk[2 * jj + 1], sa, r2, r3);
            }
        }
        { /* dS^T to the scratch, through shared memory for whole 16-byte stores */
            bf16 *w = sS + (warp * 16 + g) * SDC_AM_LD + 2 * c;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                *reinterpret_cast<uint32_t *>(w + 8 * j) = sdc_am_pack(dpt[j][0], dpt[j][1]);
                *reinterpret_cast<uint32_t *>(w + 8 * SDC_AM_LD + 8 * j) = sdc_am_pack(dpt[j][2], dpt[j][3]);
            }
            __syncthreads();
            bf16 *dst = ds + sdc_am_ds_tile(bh, nT, qt, kt);
            for (int i = threadIdx.x; i < SDC_AM_BN * 8; i += SDC_AM_THREADS) {
                const int r = i >> 3, col = (i & 7) * 8;
                *reinterpret_cast<uint4 *>(dst + r * SDC_AM_BN + col) =
                    *reinterpret_cast<const uint4 *>(sS + r * SDC_AM_LD + col);
            }
        }
        __syncthreads(); /* the buffers are refilled by the next iteration */
    }
    bf16 *dkp = io.dk + ((size_t)b * T) * ldkv + kvh * SDC_AM_HS + 2 * c;
    bf16 *dvp = io.dv + ((size_t)b * T) * ldkv + kvh * SDC_AM_HS + 2 * c;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        *reinterpret_cast<__nv_bfloat162 *>(dkp + (size_t)key_lo * ldkv + 8 * j) = __floats2bfloat162_rn(dk[j][0], dk[j][1]);
        *reinterpret_cast<__nv_bfloat162 *>(dkp + (size_t)key_hi * ldkv + 8 * j) = __floats2bfloat162_rn(dk[j][2], dk[j][3]);
        *reinterpret_cast<__nv_bfloat162 *>(dvp + (size_t)key_lo * ldkv + 8 * j) = __floats2bfloat162_rn(dv[j][0], dv[j][1]);
        *reinterpret_cast<__nv_bfloat162 *>(dvp + (size_t)key_hi * ldkv + 8 * j) = __floats2bfloat162_rn(dv[j][2], dv[j][3]);
    }
}

/* dQ from the stored dS^T: the block of query tile qt (4 warps x 16 queries,
 * last tiles first) loops over the key tiles kt <= qt, K and dS^T tiles
 * brought in by cp.async, double buffered: dQ += dS K, A = dS read
 * transposed from dS^T [key][query], B = K [key][d]. One product per tile
 * pair, summed in key-tile order: the bits repeat. */
static const size_t sdc_am_bwd_qds_smem = (size_t)4 * SDC_AM_BN * SDC_AM_LD * sizeof(bf16);

__global__ void __launch_bounds__(SDC_AM_THREADS)
    sdc_am_bwd_q_ds_kernel(const bf16 *__restrict__ ds, const sdc_att_io io, int T) {
    extern __shared__ __align__(128) unsigned char sdc_am_sm[];
    bf16 *sK = reinterpret_cast<bf16 *>(sdc_am_sm); /* [2][64][LD] */
    bf16 *sS = sK + 2 * SDC_AM_BN * SDC_AM_LD;      /* dS^T, [2][64][LD] */
    const int nT = T / SDC_AM_BN;
    const int qt = gridDim.x - 1 - blockIdx.x;
    const int NH = io.NH;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / io.grp;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const size_t ldq = (size_t)io.ldq, ldkv = (size_t)io.ldkv;
    const bf16 *kbase = io.k + (size_t)b * T * ldkv + kvh * SDC_AM_HS;
    const bf16 *sbase = ds + sdc_am_ds_tile(bh, nT, qt, 0); /* tiles (qt, 0..qt) are consecutive */
    auto load = [&](int kt, int buf) {
        sdc_am_load<SDC_AM_BN>(sK + buf * SDC_AM_BN * SDC_AM_LD, kbase + (size_t)kt * SDC_AM_BN * ldkv, ldkv);
        sdc_am_load<SDC_AM_BN>(sS + buf * SDC_AM_BN * SDC_AM_LD, sbase + (size_t)kt * SDC_AM_BN * SDC_AM_BN,
                               (size_t)SDC_AM_BN);
    };
    load(0, 0);
    sdc_cp_commit();
    float dq[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) dq[j][e] = 0.f;
    for (int kt = 0; kt <= qt; kt++) {
        if (kt + 1 <= qt) {
            load(kt + 1, (kt + 1) & 1);
            sdc_cp_commit();
            sdc_cp_wait<1>();
        } else {
            sdc_cp_wait<0>();
        }
        __syncthreads();
        const bf16 *tK = sK + (kt & 1) * SDC_AM_BN * SDC_AM_LD, *tS = sS + (kt & 1) * SDC_AM_BN * SDC_AM_LD;
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            uint32_t a[4];
            sdc_am_ldsm4t(a[0], a[1], a[2], a[3],
                          tS + (16 * ks + (lane & 7) + ((lane >> 4) << 3)) * SDC_AM_LD + warp * 16 +
                              ((lane >> 3) & 1) * 8);
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                uint32_t r0, r1, r2, r3;
                sdc_am_frag_b_kn(r0, r1, r2, r3, tK, 16 * ks, 16 * jj, lane);
                sdc_am_mma(dq[2 * jj], a, r0, r1);
                sdc_am_mma(dq[2 * jj + 1], a, r2, r3);
            }
        }
        __syncthreads(); /* the buffer is refilled by the next iteration's loads */
    }
    const int q_lo = qt * SDC_AM_BN + warp * 16 + g;
    bf16 *dqp = io.dq + ((size_t)b * T + q_lo) * ldq + h * SDC_AM_HS + 2 * c;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        *reinterpret_cast<__nv_bfloat162 *>(dqp + 8 * j) = __floats2bfloat162_rn(dq[j][0], dq[j][1]);
        *reinterpret_cast<__nv_bfloat162 *>(dqp + 8 * ldq + 8 * j) = __floats2bfloat162_rn(dq[j][2], dq[j][3]);
    }
}

/* ================= launchers ================= */
/* Whether the mma kernels take this shape: head size 64, T a multiple of 128. */
bool sdc_am_supported(int T, int C, int NH) { return T > 0 && NH > 0 && C == NH * SDC_AM_HS && T % SDC_AM_BM == 0; }

static int sdc_am_smem_attr(const void *kernel, size_t bytes, int *done) {
    if (*done) return SD_OK;
    SD_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    *done = 1;
    return SD_OK;
}

/* The forward on io (checked by the caller). */
int sdc_am_forward_io(void *out, float *lse, const sdc_att_io &io, int B, int T, void *stream) {
    static int done = 0;
    int rc = sdc_am_smem_attr((const void *)sdc_am_fwd_kernel, sdc_am_fwd_smem, &done);
    if (rc != SD_OK) return rc;
    const float scale_log2 = SDC_AM_LOG2E / sqrtf((float)SDC_AM_HS);
    dim3 grid((unsigned)(T / SDC_AM_BM), (unsigned)(B * io.NH));
    sdc_am_fwd_kernel<<<grid, SDC_AM_THREADS, sdc_am_fwd_smem, (cudaStream_t)stream>>>((bf16 *)out, lse, io, T,
                                                                                       scale_log2);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/* D (one float per row), then dS^T of every tile pair on or below the
 * diagonal (64 x 64 bf16 each) */
size_t sdc_am_backward_scratch_bytes(int B, int T, int NH) {
    if (B <= 0 || T <= 0 || NH <= 0) return 0;
    const size_t nT = (size_t)T / SDC_AM_BN, pairs = nT * (nT + 1) / 2;
    return (size_t)B * NH * T * sizeof(float) + (size_t)B * NH * pairs * SDC_AM_BN * SDC_AM_BN * sizeof(bf16);
}

/* The backward on io (checked by the caller): D, then dK and dV (a block a
 * key tile and key/value head), then dQ. */
int sdc_am_backward_io(const sdc_att_io &io, const void *dout, const void *out, const float *lse, int B, int T,
                       void *scratch, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    const int NH = io.NH, C = NH * SDC_AM_HS;
    const size_t rows = (size_t)B * NH * T;
    float *D = (float *)scratch;
    sdc_am_pre_kernel<<<(unsigned)((rows + 255) / 256), 256, 0, s>>>(D, (const bf16 *)dout, (const bf16 *)out, B, T,
                                                                     C, NH);
    SD_CUDA(cudaGetLastError());
    const float scale = 1.f / sqrtf((float)SDC_AM_HS);
    const float scale_log2 = scale * SDC_AM_LOG2E;
    static int done_kv = 0, done_q = 0;
    int rc = sdc_am_smem_attr((const void *)sdc_am_bwd_kv_kernel, sdc_am_bwd_kv_smem, &done_kv);
    if (rc != SD_OK) return rc;
    rc = sdc_am_smem_attr((const void *)sdc_am_bwd_q_ds_kernel, sdc_am_bwd_qds_smem, &done_q);
    if (rc != SD_OK) return rc;
    bf16 *ds = (bf16 *)(D + rows);
    sdc_am_bwd_kv_kernel<<<dim3((unsigned)(T / SDC_AM_BN), (unsigned)(B * (NH / io.grp))), SDC_AM_THREADS,
                           sdc_am_bwd_kv_smem, s>>>(ds, (const bf16 *)dout, io, lse, D, T, scale_log2, scale);
    SD_CUDA(cudaGetLastError());
    sdc_am_bwd_q_ds_kernel<<<dim3((unsigned)(T / SDC_AM_BN), (unsigned)(B * NH)), SDC_AM_THREADS,
                             sdc_am_bwd_qds_smem, s>>>(ds, io, T);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
