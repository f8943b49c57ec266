/*
 * sd_compute_loss.cu: softmax cross-entropy, forward and backward in one
 * kernel, with the loss and accuracy statistics reduced deterministically.
 *
 * logits (rows,classes), labels int32 (rows), dlogits (rows,classes), stats (3).
 *
 * One warp per row, two passes over it. The first finds the row's maximum,
 * its first arg-max (ties go to the smaller index) and the sum of
 * exp(x - max) in double at once: lane l takes classes l, l+32, ... (or, where
 * the rows are 16-byte aligned and classes % 4 == 0, the four classes of
 * vectors l, l+32, ...), keeps its own maximum and the sum of exp(x - that
 * maximum), scaled by exp(old - new) when it grows, and the warp combines the
 * lanes' pairs the same way. The second writes
 *   dlogits[j] = float32(float64(float32(p_j)) * scale / sum) - [j == label] * scale
 * with p_j = exp(x_j - max) in double, the same rounding steps as the CPU
 * engine (the sum, in double, is added in another order). The row's loss
 * is log(sum) - (x_label - max), in double. A pass for the maximum, one for
 * the sum and one for the gradient, in 4-byte loads, took 3.46 ms for GPT-2's
 * 8192 x 50304 on an H100 (2026-12-06), where reading the logits twice and
 * writing the gradient once takes about 1.5 at the memory's speed. Rows
 * labelled -1 (padding), and rows whose label is out of range (the host
 * rejects those before they get here), get zero gradients and count for
 * nothing.
 *
 * Statistics without float atomics: block b owns rows [b*R, (b+1)*R); warp w
 * of it takes rows b*R+w, +8, ... and adds its rows' losses in row order; the
 * block adds its warps in warp order into partial b; the last block to finish
 * (an integer ticket) adds the partials in a fixed order with all its threads
 * (sd_reduce.cuh; one thread adding them one after another waited on a chain
 * of L2 loads, several microseconds) and adds the totals to stats as float32,
 * then resets the ticket.
 *
 * sdc_softmax_xent on bf16 logits (SDC_BF16) takes the bf16 kernels below
 * ("bf16"): other arithmetic that fuses more (one block a row, the gradient
 * in place of the logits, a loss per row, then the statistics by a second
 * kernel).
 */
#include <math.h>
#include <string.h>

#include "sd_bf16.cuh"
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "sd_reduce.cuh"
#include "symddp_compute.h"
#include "sd_step_node.cuh"

/* ---- the fp32 kernel (cuda/localcheck/xent_f32_sim.cpp runs it on the CPU) ---- */

#define SDC_XENT_WARPS 8
#define SDC_XENT_THREADS (SDC_XENT_WARPS * 32)
#define SDC_XENT_PER_SM 3 /* blocks an SM holds at once (80 registers a thread) */
/* Counter 0 is this kernel's ticket. */
#define SDC_XENT_COUNTER 0

/* Per-block partial statistics in the scratch. */
struct sdc_xent_partial {
    double loss;
    int32_t correct;
    int32_t labelled;
};

/* Combines (value, index) pairs: the larger value, the smaller index on ties. */
static __device__ __forceinline__ void sdc_argmax_combine(float &v, int &j, float ov, int oj) {
    if (ov > v || (ov == v && oj < j)) {
        v = ov;
        j = oj;
    }
}

__global__ void __launch_bounds__(SDC_XENT_THREADS, SDC_XENT_PER_SM)
    sdc_xent_kernel(const float *__restrict__ logits, const int32_t *__restrict__ labels,
                    int64_t rows, int64_t classes, float *__restrict__ dlogits, float scale_arg,
                    const sdc_step *block, float *stats, sdc_xent_partial *partial,
                    uint32_t *ticket_word, int64_t rows_per_block) {
    sdc_wait_prior_grid();
    __shared__ double warp_loss[SDC_XENT_WARPS];
    __shared__ int32_t warp_correct[SDC_XENT_WARPS], warp_labelled[SDC_XENT_WARPS];
    __shared__ uint32_t ticket;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float scale = block ? block->loss_scale : scale_arg;
    const int64_t r0 = (int64_t)blockIdx.x * rows_per_block;
    const int64_t r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;

    /* 16-byte loads and stores where the rows allow (GPT-2's 50304 classes) */
    const bool vec = (classes & 3) == 0 && ((uintptr_t)logits & 15) == 0 && ((uintptr_t)dlogits & 15) == 0;
    double loss = 0.0;
    int32_t correct = 0, labelled = 0;
    for (int64_t r = r0 + warp; r < r1; r += SDC_XENT_WARPS) {
        const float *x = logits + r * classes;
        float *g = dlogits + r * classes;
        const int32_t y = labels[r];
        if (y < 0 || (int64_t)y >= classes) {
            if (vec)
                for (int64_t q = lane; q < classes / 4; q += 32) ((float4 *)g)[q] = make_float4(0.f, 0.f, 0.f, 0.f);
            else
                for (int64_t j = lane; j < classes; j += 32) g[j] = 0.0f;
            continue;
        }
        /* One pass for the maximum, the first arg-max and the sum: each lane
         * keeps its classes' maximum and the sum of exp(x - its maximum),
         * scaling the sum by exp(old - new) when the maximum grows. */
        float best = -INFINITY;
        int bj = 0x7fffffff;
        double s = 0.0;
        auto see = [&](float v, int j) {
            if (bj == 0x7fffffff || v > best) {
                s = bj == 0x7fffffff ? 1.0 : s * exp((double)best - (double)v) + 1.0;
                best = v;
                bj = j;
            } else {
                s += exp((double)v - (double)best);
            }
        };
        if (vec) {
            const float4 *x4 = (const float4 *)x;
            const int64_t nq = classes / 4;
            auto see4 = [&](float4 v, int64_t q) { /* vector q: classes 4q .. 4q+3 */
                const int j = (int)(4 * q);
                see(v.x, j);
                see(v.y, j + 1);
                see(v.z, j + 2);
                see(v.w, j + 3);
            };
            int64_t q = lane;
            for (; q + 32 < nq; q += 64) { /* two loads in flight before their use */
                const float4 a = x4[q], b = x4[q + 32];
                see4(a, q);
                see4(b, q + 32);
            }
            for (; q < nq; q += 32) see4(x4[q], q);
        } else {
#pragma unroll 4
            for (int64_t j = lane; j < classes; j += 32) see(x[j], (int)j);
        }
        /* The lanes' maxima and sums, each sum moved to the larger maximum.
         * Partners add the same two terms, so every lane ends on the same
         * sum. A lane without a class (sum 0, index 0x7fffffff) loses every
         * tie and adds nothing. */
        for (int off = 16; off > 0; off >>= 1) {
            const float ob = __shfl_xor_sync(0xffffffffu, best, off);
            const int oj = __shfl_xor_sync(0xffffffffu, bj, off);
            const double os = __shfl_xor_sync(0xffffffffu, s, off);
            float nb = best;
            int nj = bj;
            sdc_argmax_combine(nb, nj, ob, oj);
            double t = 0.0;
            if (s != 0.0) t += s * exp((double)best - (double)nb);
            if (os != 0.0) t += os * exp((double)ob - (double)nb);
            s = t;
            best = nb;
            bj = nj;
        }
        const double m = (double)best, sum = s;
        const double inv = (double)scale / sum;
        auto grad = [&](float v, int j) {
            const float p = (float)exp((double)v - m);
            float gj = (float)((double)p * inv);
            if (j == y) gj = __fsub_rn(gj, scale);
            return gj;
        };
        if (vec) {
            const float4 *x4 = (const float4 *)x;
            float4 *g4 = (float4 *)g;
#pragma unroll 4
            for (int64_t q = lane; q < classes / 4; q += 32) {
                const float4 v = x4[q];
                const int j = (int)(4 * q);
                g4[q] = make_float4(grad(v.x, j), grad(v.y, j + 1), grad(v.z, j + 2), grad(v.w, j + 3));
            }
        } else {
#pragma unroll 4
            for (int64_t j = lane; j < classes; j += 32) g[j] = grad(x[j], (int)j);
        }
        if (lane == 0) {
            loss += log(sum) - ((double)x[y] - m);
            correct += bj == y;
            labelled++;
        }
    }
    if (lane == 0) {
        warp_loss[warp] = loss;
        warp_correct[warp] = correct;
        warp_labelled[warp] = labelled;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        sdc_xent_partial p;
        p.loss = warp_loss[0];
        p.correct = warp_correct[0];
        p.labelled = warp_labelled[0];
        for (int w = 1; w < SDC_XENT_WARPS; w++) {
            p.loss += warp_loss[w];
            p.correct += warp_correct[w];
            p.labelled += warp_labelled[w];
        }
        partial[blockIdx.x] = p;
        __threadfence();
        ticket = atomicAdd(ticket_word, 1u);
    }
    __syncthreads();
    if (ticket != gridDim.x - 1) return; /* the same for the whole block */
    __threadfence();
    /* The last block adds the partials: thread t takes partials t, t+T, ...
     * in order, then the block sums (sd_reduce.cuh) in a fixed order. The
     * counts are integers below 2^53: exact in double, in any order. */
    double tl = 0.0, tc = 0.0, tn = 0.0;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) {
        tl += __ldcg(&partial[b].loss);
        tc += (double)__ldcg(&partial[b].correct);
        tn += (double)__ldcg(&partial[b].labelled);
    }
    __shared__ double s[32];
    tl = sdc_block_sum(tl, s);
    tc = sdc_block_sum(tc, s);
    tn = sdc_block_sum(tn, s);
    if (threadIdx.x != 0) return;
    stats[0] = __fadd_rn(stats[0], (float)tl);
    stats[1] = __fadd_rn(stats[1], (float)tc);
    stats[2] = __fadd_rn(stats[2], (float)tn);
    *ticket_word = 0;
}

/* ---- the fp32 kernel's step node ---- */

/* The loss kernel's step values: the scale (argument 5) by value, no block (6). */
static void sdc_xent_set_values(sdc_step_node *n, const sdc_step *v) {
    *(float *)n->argv[5] = v->loss_scale;
    *(const sdc_step **)n->argv[6] = NULL;
}

bool sdc_xent_step_node(const cudaKernelNodeParams *p, sdc_step_node *out) {
    if (p->func != (void *)sdc_xent_kernel) return false;
    const size_t sizes[] = {sizeof(const float *), sizeof(const int32_t *), sizeof(int64_t), sizeof(int64_t),
                            sizeof(float *), sizeof(float), sizeof(const sdc_step *), sizeof(float *),
                            sizeof(sdc_xent_partial *), sizeof(uint32_t *), sizeof(int64_t)};
    /* Only a node recorded reading the block: one captured with a scale
     * by value keeps it. */
    return p->kernelParams && *(const sdc_step *const *)p->kernelParams[6] &&
           sdc_step_node_fill(p, out, sizes, (int)(sizeof sizes / sizeof sizes[0]), sdc_xent_set_values);
}

/* ---- bf16 ---- */

/*
 * The bf16 kernels: fused softmax cross-entropy over bf16 logits, the
 * gradient written in place, losses per row, then the loss statistics.
 *
 * One block per row of (N, Vp) logits. Pass 1: each thread keeps a running
 * (max, sum of exp) over its 8-element vectors (columns [0,V) only); the block
 * combines the pairs in a fixed tree (warp butterfly, then the warps in order),
 * giving lse = max + log(sum). loss = lse - logit[target], the target logit read
 * before any write. Pass 2 (write_grad): logits := (exp(x - lse) - [j == target])
 * * dscale as bf16, 0 for padded columns and ignored rows (target -1). The
 * logits are never copied to fp32.
 *
 * CACHE: pass 1 also keeps the row's bf16 vectors in shared memory (Vp * 2
 * bytes: 100,608 at GPT-2's padded 50304, which lets two blocks share an SM),
 * and pass 2 reads them there, so the logits cross HBM once each way instead
 * of being read twice (uncached: 1.68 ms a step at llama-124m B16 on an H100,
 * 4.9 GB at 2.9 TB/s; scripts/gpu-kernprof.sh, 2026-12-07). A thread writes
 * and reads only its own vectors, in the same order, with the same
 * operations: the bits are those of the uncached kernel (gptcheck compares
 * them). Rows too long for two blocks an SM (Llama 3's 128256) run uncached.
 * Cached, a thread puts all its vectors of the row in flight at once
 * (cp.async into shared memory, in SDC_CLSB_GROUPS groups) and adds each
 * group as it lands; uncached, it loads SDC_CLSB_UNROLL vectors before it
 * adds them.
 */

/* Threads a row. gptcheck times the others at GPT-2's 16384 x 50304 on the
 * H200 (2026-12-02, uncached): 256 1230 us, 512 1302 us, 1024 1306 us; more
 * blocks a row's SM runs at once keep more of the rows' loads in flight. */
#define SDC_CLSB_THREADS 256
#define SDC_CLSB_CACHED_THREADS 512 /* cached: fewer blocks an SM (two), more threads a row */
#define SDC_CLSB_UNROLL 4 /* uncached: vectors a thread loads before it adds them */
#define SDC_CLSB_GROUPS 4 /* cached: the copy groups a thread's vectors come in */

/* Waits until the copy groups up to g of G have landed (cp.async.wait_group
 * takes a constant: G - 1 - g newest may stay in flight). */
template <int G>
static __device__ __forceinline__ void sdc_cp_wait_upto(int g) {
    if (g >= G - 1) sdc_cp_wait<0>();
    else if (g == G - 2) sdc_cp_wait<1>();
    else if (g == G - 3) sdc_cp_wait<2>();
    else sdc_cp_wait<3>();
}

/* gptcheck's switches: the bf16 block size to time (256, 512 or 1024; 0: the
 * default, SDC_CLSB_CACHED_THREADS or SDC_CLSB_THREADS), and
 * 0 to run uncached where the row would fit (1: cache where it fits). */
extern "C" {
int sdc_clsb_threads = 0;
int sdc_clsb_cache = 1;
}

/* Merges (m2, s2) into (m, s): s sums exp(x - m). */
static __device__ __forceinline__ void sdc_clsb_lse_merge(float &m, float &s, float m2, float s2) {
    const float mn = fmaxf(m, m2);
    if (mn == -INFINITY) return; /* both empty */
    s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
    m = mn;
}

/* Adds vector i of a row (its 8 logits, columns past V ignored) to the
 * thread's running (max m, sum s of exp(x - m)). */
static __device__ __forceinline__ void sdc_clsb_add(const uint4 raw, int i, int V, float &m, float &s) {
    float f[8];
    sdb_unpack8(raw, f);
    float vm = -INFINITY;
#pragma unroll
    for (int k = 0; k < 8; k++)
        if (8 * i + k < V) vm = fmaxf(vm, f[k]);
    if (vm == -INFINITY) return; /* all padding */
    const float mn = fmaxf(m, vm);
    float add = 0.f;
#pragma unroll
    for (int k = 0; k < 8; k++)
        if (8 * i + k < V) add += __expf(f[k] - mn);
    s = s * __expf(m - mn) + add; /* m = -inf at first: exp(-inf) = 0 */
    m = mn;
}

template <int THREADS, bool CACHE>
__global__ void __launch_bounds__(THREADS)
    sdc_clsb_kernel(float *__restrict__ losses, bf16 *__restrict__ logits, const int32_t *__restrict__ targets,
                          int V, int Vp, float dscale, int write_grad) {
    extern __shared__ uint4 sm_row[]; /* CACHE: the row's Vp/8 vectors */
    __shared__ float sm_m[THREADS / 32], sm_s[THREADS / 32];
    __shared__ float sm_lse, sm_tgt;
    const int row = blockIdx.x;
    bf16 *x = logits + (size_t)row * Vp;
    const uint4 *xv = reinterpret_cast<const uint4 *>(x);
    const int tgt = targets[row];
    if (threadIdx.x == 0) sm_tgt = (tgt >= 0 && tgt < V) ? __bfloat162float(x[tgt]) : 0.f;
    const int nv = Vp >> 3;
    float m = -INFINITY, s = 0.f;
    if (CACHE) {
        /* the thread's vectors tid + k*THREADS, k < nk, copied in
         * SDC_CLSB_GROUPS groups (all in flight at once), each added as
         * soon as its group has landed, in order of k */
        constexpr int G = SDC_CLSB_GROUPS;
        const int tid = threadIdx.x;
        const int nk = nv > tid ? (nv - tid + THREADS - 1) / THREADS : 0, q = (nk + G - 1) / G;
        for (int g = 0; g < G; g++) {
            for (int k = g * q; k < nk && k < (g + 1) * q; k++) sdc_cp16(&sm_row[tid + k * THREADS], xv + tid + k * THREADS);
            sdc_cp_commit();
        }
#pragma unroll
        for (int g = 0; g < G; g++) {
            sdc_cp_wait_upto<G>(g);
            for (int k = g * q; k < nk && k < (g + 1) * q; k++) sdc_clsb_add(sm_row[tid + k * THREADS], tid + k * THREADS, V, m, s);
        }
    } else {
        for (int i0 = threadIdx.x; i0 < nv; i0 += THREADS * SDC_CLSB_UNROLL) {
            uint4 raw[SDC_CLSB_UNROLL];
#pragma unroll
            for (int u = 0; u < SDC_CLSB_UNROLL; u++)
                if (i0 + u * THREADS < nv) raw[u] = xv[i0 + u * THREADS];
#pragma unroll
            for (int u = 0; u < SDC_CLSB_UNROLL; u++)
                if (i0 + u * THREADS < nv) sdc_clsb_add(raw[u], i0 + u * THREADS, V, m, s);
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        sdc_clsb_lse_merge(m, s, m2, s2);
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) {
        sm_m[warp] = m;
        sm_s[warp] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float bm = sm_m[0], bs = sm_s[0];
        for (int w = 1; w < THREADS / 32; w++) sdc_clsb_lse_merge(bm, bs, sm_m[w], sm_s[w]);
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
        sdb_unpack8(CACHE ? sm_row[i] : xv[i], f);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int j = 8 * i + k;
            float g = 0.f;
            if (!ignore && j < V) g = (__expf(f[k] - lse) - (j == tgt ? 1.f : 0.f)) * dscale;
            f[k] = g;
        }
        sdb_store8(x + 8 * i, f);
    }
}

/* Launches the bf16 kernel of THREADS a row, with the row cached in shared
 * memory where cache is set (bytes: Vp * 2). */
template <int THREADS>
static int sdc_clsb_launch(cudaStream_t s, bool cache, size_t bytes, float *l, bf16 *x, const int32_t *t, int N, int V,
                           int Vp, float scale, int write_grad) {
    if (cache) {
        SD_CUDA(cudaFuncSetAttribute(sdc_clsb_kernel<THREADS, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)bytes));
        sdc_clsb_kernel<THREADS, true><<<N, THREADS, bytes, s>>>(l, x, t, V, Vp, scale, write_grad);
    } else {
        sdc_clsb_kernel<THREADS, false><<<N, THREADS, 0, s>>>(l, x, t, V, Vp, scale, write_grad);
    }
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

#define SDC_CLSB_STATS_THREADS 1024

/* One block: thread i sums rows i, i + 1024, ... in double, then a fixed tree. */
__global__ void __launch_bounds__(SDC_CLSB_STATS_THREADS)
    sdc_clsb_stats_kernel(float *__restrict__ stats, const float *__restrict__ losses,
                          const int32_t *__restrict__ targets, int N) {
    __shared__ double sm_l[SDC_CLSB_STATS_THREADS], sm_c[SDC_CLSB_STATS_THREADS];
    double l = 0, c = 0;
    for (int i = threadIdx.x; i < N; i += SDC_CLSB_STATS_THREADS) {
        l += (double)losses[i];
        c += targets[i] != -1 ? 1.0 : 0.0;
    }
    sm_l[threadIdx.x] = l;
    sm_c[threadIdx.x] = c;
    __syncthreads();
    for (int h = SDC_CLSB_STATS_THREADS / 2; h > 0; h >>= 1) {
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

static int sdc_softmax_xent_bf16(cudaStream_t s, uint64_t logits, uint64_t labels, int64_t rows, int64_t classes,
                                 int64_t ld, uint64_t dlogits, float scale, int32_t use_block, uint64_t stats,
                                 uint64_t losses) {
    if (rows <= 0 || classes <= 0 || ld < classes || ld % 8 != 0 || rows > 0x7fffffff || ld > 0x7fffffff)
        return SD_FAIL(SD_ERR_ARG, "sdc_softmax_xent: bf16: N=%lld V=%lld Vp=%lld (Vp >= V, a multiple of 8)",
                       (long long)rows, (long long)classes, (long long)ld);
    if (!losses || !logits || !labels || logits % 16 || (dlogits && dlogits != logits) || use_block)
        return SD_FAIL(SD_ERR_ARG, "sdc_softmax_xent: bf16: NULL or unaligned pointer, dlogits not the logits, "
                                   "or the step block");
    const int N = (int)rows, V = (int)classes, Vp = (int)ld, write_grad = dlogits != 0;
    float *l = (float *)(uintptr_t)losses;
    bf16 *x = (bf16 *)(uintptr_t)logits;
    const int32_t *t = (const int32_t *)(uintptr_t)labels;
    /* Cache the row where two blocks of it fit an SM's shared memory (and
     * pass 2 runs: the forward alone reads the row once). */
    const size_t bytes = (size_t)Vp * 2;
    bool cache = false;
    if (write_grad && sdc_clsb_cache) {
        int dev = 0, per_sm = 0, optin = 0;
        SD_CUDA(cudaGetDevice(&dev));
        SD_CUDA(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
        SD_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        cache = bytes + 2048 <= (size_t)per_sm / 2 && bytes + 1024 <= (size_t)optin;
    }
    switch (sdc_clsb_threads ? sdc_clsb_threads : cache ? SDC_CLSB_CACHED_THREADS : SDC_CLSB_THREADS) {
    case 256: SD_TRY(sdc_clsb_launch<256>(s, cache, bytes, l, x, t, N, V, Vp, scale, write_grad)); break;
    case 512: SD_TRY(sdc_clsb_launch<512>(s, cache, bytes, l, x, t, N, V, Vp, scale, write_grad)); break;
    case 1024: SD_TRY(sdc_clsb_launch<1024>(s, cache, bytes, l, x, t, N, V, Vp, scale, write_grad)); break;
    default: return SD_FAIL(SD_ERR_ARG, "sdc_softmax_xent: bf16: no kernel of %d threads a row", sdc_clsb_threads);
    }
    if (stats) {
        sdc_clsb_stats_kernel<<<1, SDC_CLSB_STATS_THREADS, 0, s>>>((float *)(uintptr_t)stats, l, t, N);
        SD_CUDA(cudaGetLastError());
    }
    return SD_OK;
}

/* ---- launcher ---- */

extern "C" int sdc_softmax_xent(const sdc_ctx *c, sdc_dtype dtype, uint64_t logits, uint64_t labels, int64_t rows,
                                int64_t classes, int64_t ld, uint64_t dlogits, float scale, int32_t use_block,
                                uint64_t stats, uint64_t losses) {
    if (c && dtype == SDC_BF16) {
        SD_TRY(sdc_use_device(c->device));
        return sdc_softmax_xent_bf16((cudaStream_t)(uintptr_t)c->stream, logits, labels, rows, classes, ld, dlogits,
                                     scale, use_block, stats, losses);
    }
    (void)losses;
    if (!c || dtype != SDC_F32 || ld != classes || rows <= 0 || classes <= 0 || classes > 0x7ffffffe)
        return SD_FAIL(SD_ERR_ARG, "sdc_softmax_xent: %lld rows of %lld classes", (long long)rows,
                       (long long)classes);
    SD_TRY(sdc_use_device(c->device));
    /* As many blocks as the SMs hold at once, at least one row per warp:
     * each warp keeps its loads in flight (with 4-byte loads and two blocks
     * an SM the kernel took 4.5 ms for GPT-2's 8192 x 50304 on an H100,
     * 2026-12-06; with four, 3.48). */
    const int64_t target = SDC_XENT_PER_SM * (int64_t)(c->sm_count > 0 ? c->sm_count : 1);
    int64_t per = (rows + target - 1) / target;
    per = (per + SDC_XENT_WARPS - 1) / SDC_XENT_WARPS * SDC_XENT_WARPS;
    int64_t blocks = (rows + per - 1) / per;
    const int64_t room = c->scratch_bytes / (int64_t)sizeof(sdc_xent_partial);
    if (blocks > room) {
        per = (rows + room - 1) / room;
        blocks = (rows + per - 1) / per;
    }
    SD_CUDA(sdc_launch(sdc_xent_kernel, dim3((unsigned)blocks), dim3(SDC_XENT_THREADS),
                       (cudaStream_t)(uintptr_t)c->stream, (const float *)(uintptr_t)logits,
                       (const int32_t *)(uintptr_t)labels, rows, classes, (float *)(uintptr_t)dlogits, scale,
                       use_block ? (const sdc_step *)(uintptr_t)c->step : NULL, (float *)(uintptr_t)stats,
                       (sdc_xent_partial *)(uintptr_t)c->scratch,
                       (uint32_t *)(uintptr_t)c->counters + SDC_XENT_COUNTER, per));
    return SD_OK;
}
