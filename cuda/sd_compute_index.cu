/*
 * sd_compute_index.cu: rows of a table gathered and scattered by int32
 * index (compute.Indexing: the GPT's token and position embeddings and
 * their gradients).
 *
 * The gather is a block per row. The scatter-add keeps the CPU engine's
 * order: every element of the table adds the rows that index it in order
 * of the row. A warp owns 32 columns and the table rows k with k % groups ==
 * its group: it walks the indices 32 at a time, and the rows of its group
 * among them (a ballot) one after the other in order, so that each table
 * element is only ever added to by one thread, in row order, without
 * atomics.
 *
 * The bf16 embedding of a GPT-2 (wte[token] + wpe[t] in one kernel, its
 * backward through a sort of the tokens) is below ("bf16").
 */
#include <cub/cub.cuh>

#include "sd_bf16.cuh"
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

#define SDC_INDEX_THREADS 256 /* the scatter: eight warps a block */
#define SDC_INDEX_GROUPS 64   /* the scatter: most groups of table rows */

/* dst row r = table row idx[r], or += it; an index outside 0..vrows-1 reads as zeros. */
__global__ void sdc_index_gather_kernel(float *__restrict__ dst, const float *__restrict__ table,
                                        const int32_t *__restrict__ idx, int64_t cols, int64_t vrows,
                                        int accumulate) {
    const int64_t r = blockIdx.x;
    const int32_t k = idx[r];
    const bool in = k >= 0 && k < vrows;
    float *out = dst + r * cols;
    const float *row = table + (in ? (int64_t)k : 0) * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        if (!accumulate)
            out[j] = in ? row[j] : 0.0f;
        else if (in)
            out[j] = __fadd_rn(out[j], row[j]);
    }
}

/*
 * The warp of column chunk blockIdx.x and group g adds, in order of i, src
 * row i to table row idx[i] for the i whose index is in its group.
 */
__global__ void __launch_bounds__(SDC_INDEX_THREADS)
    sdc_index_scatter_kernel(float *__restrict__ table, const float *__restrict__ src,
                             const int32_t *__restrict__ idx, int64_t rows, int64_t cols, int64_t vrows,
                             int groups) {
    const int lane = threadIdx.x & 31;
    const int g = blockIdx.y * (SDC_INDEX_THREADS / 32) + (threadIdx.x >> 5);
    if (g >= groups) return; /* a whole warp */
    const int64_t j = (int64_t)blockIdx.x * 32 + lane;
    const bool col = j < cols;
    for (int64_t i0 = 0; i0 < rows; i0 += 32) {
        const int32_t k = i0 + lane < rows ? idx[i0 + lane] : -1;
        unsigned mine = __ballot_sync(0xffffffffu, k >= 0 && k < vrows && k % groups == g);
        while (mine) {
            const int t = __ffs(mine) - 1;
            mine &= mine - 1;
            const int64_t kk = __shfl_sync(0xffffffffu, k, t);
            if (col) {
                float *p = table + kk * cols + j;
                *p = __fadd_rn(*p, src[(i0 + t) * cols + j]);
            }
        }
    }
}

static bool sdc_index_args(int64_t rows, int64_t cols, int64_t vrows) {
    return rows >= 0 && rows <= 0x7fffffff && cols >= 0 && vrows >= 0 && vrows <= 0x7fffffff &&
           (cols == 0 || (rows <= INT64_MAX / cols && vrows <= INT64_MAX / cols)) && (cols + 31) / 32 <= 0x7fffffff;
}

extern "C" int sdc_index_gather(const sdc_ctx *c, uint64_t dst, uint64_t table, uint64_t idx, int64_t rows,
                                int64_t cols, int64_t table_rows, sdc_flag accumulate) {
    if (!c || !sdc_index_args(rows, cols, table_rows))
        return SD_FAIL(SD_ERR_ARG, "sdc_index_gather: bad arguments (%lld rows of %lld from %lld)", (long long)rows,
                       (long long)cols, (long long)table_rows);
    if (rows == 0 || cols == 0) return SD_OK;
    if (!dst || !idx || (table_rows > 0 && !table)) return SD_FAIL(SD_ERR_ARG, "sdc_index_gather: NULL pointer");
    SD_TRY(sdc_use_device(c->device));
    const int threads = cols >= 256 ? 256 : (int)((cols + 31) / 32 * 32);
    sdc_index_gather_kernel<<<(unsigned)rows, threads, 0, (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)dst, (const float *)(uintptr_t)table, (const int32_t *)(uintptr_t)idx, cols, table_rows,
        accumulate ? 1 : 0);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_index_scatter_add(const sdc_ctx *c, uint64_t table, uint64_t src, uint64_t idx, int64_t rows,
                                     int64_t cols, int64_t table_rows) {
    if (!c || !sdc_index_args(rows, cols, table_rows))
        return SD_FAIL(SD_ERR_ARG, "sdc_index_scatter_add: bad arguments (%lld rows of %lld into %lld)",
                       (long long)rows, (long long)cols, (long long)table_rows);
    if (rows == 0 || cols == 0 || table_rows == 0) return SD_OK;
    if (!table || !src || !idx) return SD_FAIL(SD_ERR_ARG, "sdc_index_scatter_add: NULL pointer");
    SD_TRY(sdc_use_device(c->device));
    /* Groups of table rows: as many as there are rows, up to SDC_INDEX_GROUPS. */
    const int groups = table_rows < SDC_INDEX_GROUPS ? (int)table_rows : SDC_INDEX_GROUPS;
    const int warps = SDC_INDEX_THREADS / 32;
    const dim3 grid((unsigned)((cols + 31) / 32), (unsigned)((groups + warps - 1) / warps));
    sdc_index_scatter_kernel<<<grid, SDC_INDEX_THREADS, 0, (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)table, (const float *)(uintptr_t)src, (const int32_t *)(uintptr_t)idx, rows, cols,
        table_rows, groups);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/* ---- bf16 ---- */

/*
 * The bf16 token + position embedding (GPT-2's, sdc_embed_bf16 and
 * sdc_embed_backward_bf16), forward and backward: other kernels than the
 * gather and scatter above, which the fp32 engine composes.
 *
 * forward: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:], one thread per 8 channels;
 * without a position table (wpe 0: a Llama, whose attention places the
 * tokens) out[b,t,:] = wte[tokens[b,t],:], and the backward has no dwpe.
 * backward, deterministic without float atomics:
 *   dwpe[t,:] += sum over b (in order) of dout[b,t,:], one thread per 8 channels;
 *   dwte: the N = B*T positions are sorted by token with CUB's radix sort
 *   (stable: positions of one token stay in increasing order), then a block per
 *   sorted index that starts a run of one token sums the run's dout rows in
 *   order (each thread 8 channels) and adds the sum to that token's row. The
 *   order of every addition depends only on the tokens.
 * Scratch (sdc_embed_backward_bf16_scratch_bytes): keys out, positions in and out
 * (int32 [N] each), then CUB's temporary storage, each 256-byte aligned.
 */

#define SDC_EMBB_THREADS 128

__global__ void sdc_embb_fwd_kernel(bf16 *__restrict__ out, const int32_t *__restrict__ tokens,
                                     const bf16 *__restrict__ wte, const bf16 *__restrict__ wpe, int N, int T,
                                     int C) {
    const int nv = C >> 3;
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)N * nv) return;
    const int row = (int)(idx / nv), v = (int)(idx % nv);
    const int t = row % T;
    const int tok = tokens[row];
    float a[8], p[8];
    sdb_load8(wte + (size_t)tok * C + 8 * v, a);
    if (wpe) {
        sdb_load8(wpe + (size_t)t * C + 8 * v, p);
#pragma unroll
        for (int k = 0; k < 8; k++) a[k] += p[k];
    }
    sdb_store8(out + (size_t)row * C + 8 * v, a);
}

__global__ void sdc_embb_iota_kernel(int32_t *p, int N) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) p[i] = i;
}

static __device__ __forceinline__ void sdc_embb_add8_f32(float *dst, const float a[8]) {
    float4 *d = reinterpret_cast<float4 *>(dst);
    float4 x = d[0], y = d[1];
    x.x += a[0]; x.y += a[1]; x.z += a[2]; x.w += a[3];
    y.x += a[4]; y.y += a[5]; y.z += a[6]; y.w += a[7];
    d[0] = x;
    d[1] = y;
}

/* grid (N, ceil(C/8 / SDC_EMBB_THREADS)): block x is a sorted index. */
__global__ void __launch_bounds__(SDC_EMBB_THREADS)
    sdc_embb_wte_bwd_kernel(float *__restrict__ dwte, const bf16 *__restrict__ dout, const int32_t *__restrict__ keys,
                             const int32_t *__restrict__ pos, int N, int C) {
    const int i = blockIdx.x;
    const int tok = keys[i];
    if (i > 0 && keys[i - 1] == tok) return; /* not the start of the token's run */
    const int v = blockIdx.y * SDC_EMBB_THREADS + threadIdx.x;
    if (v >= (C >> 3)) return;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int j = i; j < N && keys[j] == tok; j++) {
        float f[8];
        sdb_load8(dout + (size_t)pos[j] * C + 8 * v, f);
#pragma unroll
        for (int k = 0; k < 8; k++) acc[k] += f[k];
    }
    sdc_embb_add8_f32(dwte + (size_t)tok * C + 8 * v, acc);
}

__global__ void sdc_embb_wpe_bwd_kernel(float *__restrict__ dwpe, const bf16 *__restrict__ dout, int B, int T,
                                         int C) {
    const int nv = C >> 3;
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * nv) return;
    const int t = idx / nv, v = idx % nv;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int b = 0; b < B; b++) {
        float f[8];
        sdb_load8(dout + ((size_t)b * T + t) * C + 8 * v, f);
#pragma unroll
        for (int k = 0; k < 8; k++) acc[k] += f[k];
    }
    sdc_embb_add8_f32(dwpe + (size_t)t * C + 8 * v, acc);
}

static size_t sdc_embb_round256(size_t x) { return (x + 255) & ~(size_t)255; }

static int sdc_embb_bits(int V) {
    int bits = 1;
    while (bits < 31 && (1 << bits) < V) bits++;
    return bits;
}

static size_t sdc_embb_cub_bytes(int N, int V) {
    size_t temp = 0;
    cudaError_t e = cub::DeviceRadixSort::SortPairs(NULL, temp, (const int32_t *)NULL, (int32_t *)NULL,
                                                    (const int32_t *)NULL, (int32_t *)NULL, N, 0,
                                                    sdc_embb_bits(V));
    return e == cudaSuccess ? temp : 0;
}

static size_t sdc_embb_scratch_bytes(int N, int V) {
    const size_t cub_bytes = sdc_embb_cub_bytes(N, V);
    if (cub_bytes == 0) return 0;
    return 3 * sdc_embb_round256((size_t)N * sizeof(int32_t)) + sdc_embb_round256(cub_bytes);
}

extern "C" int sdc_embed_bf16(const sdc_ctx *c, uint64_t out, uint64_t tokens, uint64_t wte, uint64_t wpe, int64_t B,
                              int64_t T, int64_t C) {
    if (!c || B <= 0 || T <= 0 || C <= 0 || C % 8 != 0 || B * T > 0x7fffffff || C > 0x7fffffff)
        return SD_FAIL(SD_ERR_ARG, "sdc_embed_bf16: B=%lld T=%lld C=%lld (C a multiple of 8)", (long long)B,
                       (long long)T, (long long)C);
    if (!out || !tokens || !wte || out % 16 || wte % 16 || wpe % 16)
        return SD_FAIL(SD_ERR_ARG, "sdc_embed_bf16: NULL or unaligned pointer");
    SD_TRY(sdc_use_device(c->device));
    const int N = (int)(B * T);
    const int64_t total = (int64_t)N * (C >> 3);
    sdc_embb_fwd_kernel<<<(unsigned)((total + 255) / 256), 256, 0, (cudaStream_t)(uintptr_t)c->stream>>>(
        (bf16 *)(uintptr_t)out, (const int32_t *)(uintptr_t)tokens, (const bf16 *)(uintptr_t)wte,
        (const bf16 *)(uintptr_t)wpe, N, (int)T, (int)C);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_embed_backward_bf16_scratch_bytes(int64_t B, int64_t T, int64_t V, int64_t *bytes) {
    if (!bytes) return SD_FAIL(SD_ERR_ARG, "sdc_embed_backward_bf16_scratch_bytes: no result");
    *bytes = 0;
    if (B <= 0 || T <= 0 || V <= 0 || B * T > 0x7fffffff || V > 0x7fffffff) return SD_OK;
    *bytes = (int64_t)sdc_embb_scratch_bytes((int)(B * T), (int)V);
    return SD_OK;
}

extern "C" int sdc_embed_backward_bf16(const sdc_ctx *c, uint64_t dwte, uint64_t dwpe, uint64_t dout, uint64_t tokens,
                                       int64_t B, int64_t T, int64_t C, int64_t V, uint64_t scratch,
                                       int64_t scratch_bytes) {
    if (!c || B <= 0 || T <= 0 || C <= 0 || C % 8 != 0 || V <= 0 || B * T > 0x7fffffff || C > 0x7fffffff ||
        V > 0x7fffffff)
        return SD_FAIL(SD_ERR_ARG, "sdc_embed_backward_bf16: B=%lld T=%lld C=%lld V=%lld", (long long)B, (long long)T,
                       (long long)C, (long long)V);
    if (!dwte || !dout || !tokens || !scratch || dwte % 16 || dwpe % 16 || dout % 16 || scratch % 256)
        return SD_FAIL(SD_ERR_ARG, "sdc_embed_backward_bf16: NULL or unaligned pointer (scratch: 256 bytes)");
    const int N = (int)(B * T), Ci = (int)C, Vi = (int)V;
    const size_t seg = sdc_embb_round256((size_t)N * sizeof(int32_t));
    size_t cub_bytes = sdc_embb_cub_bytes(N, Vi);
    if (cub_bytes == 0 || scratch_bytes < 0 || (size_t)scratch_bytes < 3 * seg + cub_bytes)
        return SD_FAIL(SD_ERR_ARG, "sdc_embed_backward_bf16: scratch of %lld bytes, want %zu", (long long)scratch_bytes,
                       sdc_embb_scratch_bytes(N, Vi));
    SD_TRY(sdc_use_device(c->device));
    unsigned char *base = (unsigned char *)(uintptr_t)scratch;
    int32_t *keys_out = (int32_t *)base;
    int32_t *pos_in = (int32_t *)(base + seg);
    int32_t *pos_out = (int32_t *)(base + 2 * seg);
    void *temp = base + 3 * seg;
    cudaStream_t s = (cudaStream_t)(uintptr_t)c->stream;
    const int32_t *tok = (const int32_t *)(uintptr_t)tokens;
    const bf16 *dy = (const bf16 *)(uintptr_t)dout;

    sdc_embb_iota_kernel<<<(N + 255) / 256, 256, 0, s>>>(pos_in, N);
    SD_CUDA(cudaGetLastError());
    SD_CUDA(cub::DeviceRadixSort::SortPairs(temp, cub_bytes, tok, keys_out, (const int32_t *)pos_in, pos_out, N, 0,
                                            sdc_embb_bits(Vi), s));
    const int nv = Ci >> 3;
    dim3 grid((unsigned)N, (unsigned)((nv + SDC_EMBB_THREADS - 1) / SDC_EMBB_THREADS));
    sdc_embb_wte_bwd_kernel<<<grid, SDC_EMBB_THREADS, 0, s>>>((float *)(uintptr_t)dwte, dy, keys_out, pos_out, N, Ci);
    SD_CUDA(cudaGetLastError());
    if (dwpe) {
        sdc_embb_wpe_bwd_kernel<<<((int)T * nv + 255) / 256, 256, 0, s>>>((float *)(uintptr_t)dwpe, dy, (int)B, (int)T,
                                                                          Ci);
        SD_CUDA(cudaGetLastError());
    }
    return SD_OK;
}
