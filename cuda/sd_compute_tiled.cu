/*
 * sd_compute_tiled.cu: the project's own fp32 GEMM for small products of any
 * transposes with every epilogue of a plan (sd_compute_lt.cu), a candidate
 * of the GEMM tuner beside cuBLASLt's algorithms.
 *
 * A small model's step (batch 256 against 256 or 784 features) runs GEMMs
 * that fill a fraction of the GPU: cuBLASLt's fastest choice for them is a
 * split-K kernel, often followed by a reduction or epilogue kernel, 6-11 us
 * each in a replayed graph. This kernel does one product in one launch
 * (launched with programmatic dependent launch, like the step's other
 * kernels):
 *   - a block computes a 32 x 32 tile of C with 512 threads: eight groups of
 *     64 threads split each 128-wide slab of k between them (16 each), a
 *     thread keeps a 4 x 4 part of the tile; the groups' partial tiles are
 *     then added in group order;
 *   - the next slab's loads are issued before the current slab is used, so
 *     a tile waits out about k / 128 memory latencies;
 *   - with k split over 2 or 4 blocks a tile (the tuner tries it when few
 *     tiles leave SMs idle), each block stores its partial tile in the
 *     plan's scratch and the tile's last block adds them in split order
 *     before the epilogue;
 *   - the epilogue gives a warp one row of the tile at a time, a lane one
 *     column: the bias, the ReLU with its mask (a warp's ballot is one 32-bit
 *     word of it), the ReLU derivative read from the mask;
 *   - bias gradients: SDC_EPI_BGRAD_A's row sums of op(A) are summed by the
 *     first column of blocks while they hold op(A)'s slabs; SDC_EPI_DRELU_BGRAD's
 *     column sums of C are summed per block, stored in the plan's scratch,
 *     and the last block of a column (a counter it resets) adds them in row
 *     order.
 * Every sum has a fixed order (deterministic, bit for bit on every call, no
 * float atomics); the order differs from cuBLASLt's, so the tuner compares
 * it with cuBLASLt on random operands (the mask too) before it may be used.
 */
#include <stdint.h>

#include "sd_compute.cuh"
#include "sd_internal.h"
#include "sd_skinny.cuh"
#include "symddp_compute.h"

#define SDC_TILE 32    /* rows and columns of C a block computes */
#define SDC_TILE_K 128 /* k of one slab */
#define SDC_TILE_GROUPS 8
#define SDC_TILE_THREADS (SDC_TILE_GROUPS * 64)
/* Each of a slab's two operand tiles, per thread. */
#define SDC_TILE_LOADS (SDC_TILE * SDC_TILE_K / SDC_TILE_THREADS)
/* Row length of the slabs in shared memory: 16-byte rows, so that a thread
 * reads its four values of a row as one float4 (a quarter of the shared
 * loads of scalar reads, which bounded the kernel); the transposing stores
 * of a k-contiguous operand then meet 4-way bank conflicts, once a slab. */
#define SDC_TILE_PAD (SDC_TILE + 4)

/*
 * A thread's walk over a slab's operand tile (SDC_TILE x SDC_TILE_K
 * elements, numbered along the operand's contiguous dimension so that a
 * warp reads consecutive addresses): element e is tid + e *
 * SDC_TILE_THREADS, which keeps the thread's position along the contiguous
 * dimension and steps the other one by a fixed amount. For op(A) (i, kk):
 * without TA (stored (m,k), contiguous in k) kk = tid % 128 and i = tid /
 * 128 + 4e; with TA (stored (k,m)) i = tid % 32 and kk = tid / 32 + 16e.
 * For op(B) (kk, j): without TB (stored (k,n)) j = tid % 32 and kk = tid /
 * 32 + 16e; with TB (stored (n,k)) kk = tid % 128 and j = tid / 128 + 4e.
 */
#define SDC_WIDE_STEP (SDC_TILE_THREADS / SDC_TILE_K)  /* 4: rows a walk steps along a k-contiguous tile */
#define SDC_NARROW_STEP (SDC_TILE_THREADS / SDC_TILE) /* 16: k a walk steps along a 32-wide tile */

/* Loads n_out elements of a thread's walk: the first at (r0, c0) of a
 * row-major matrix (row length ld, rows below rows, columns below cols),
 * each next one step rows further; zero outside. */
static __device__ __forceinline__ void sdc_tile_walk(const float *__restrict__ p, int64_t ld, int rows, int cols,
                                                     int r0, int c0, int step, float *out) {
    const bool col_in = c0 < cols;
    const float *q = p + (int64_t)r0 * ld + c0;
#pragma unroll
    for (int e = 0; e < SDC_TILE_LOADS; e++)
        out[e] = (col_in && r0 + e * step < rows) ? q[(int64_t)e * step * ld] : 0.0f;
}

/* Loads a thread's part of the slab at k0: op(A) rows i0.., op(B) columns
 * j0.., zero outside the matrices. */
template <bool TA, bool TB>
static __device__ __forceinline__ void sdc_tile_load(const float *__restrict__ a, int64_t lda,
                                                     const float *__restrict__ b, int64_t ldb, int m, int n, int k,
                                                     int i0, int j0, int k0, float *ra, float *rb) {
    const int t = threadIdx.x;
    if (TA)
        sdc_tile_walk(a, lda, k, m, k0 + t / SDC_TILE, i0 + t % SDC_TILE, SDC_NARROW_STEP, ra);
    else
        sdc_tile_walk(a, lda, m, k, i0 + t / SDC_TILE_K, k0 + t % SDC_TILE_K, SDC_WIDE_STEP, ra);
    if (TB)
        sdc_tile_walk(b, ldb, n, k, j0 + t / SDC_TILE_K, k0 + t % SDC_TILE_K, SDC_WIDE_STEP, rb);
    else
        sdc_tile_walk(b, ldb, k, n, k0 + t / SDC_TILE, j0 + t % SDC_TILE, SDC_NARROW_STEP, rb);
}

/* Stores them as as[kk][i] and bs[kk][j] (rows of SDC_TILE_PAD floats). */
template <bool TA, bool TB>
static __device__ __forceinline__ void sdc_tile_store(float *as, float *bs, const float *ra, const float *rb) {
    const int t = threadIdx.x;
#pragma unroll
    for (int e = 0; e < SDC_TILE_LOADS; e++) {
        const int ai = TA ? t % SDC_TILE : t / SDC_TILE_K + e * SDC_WIDE_STEP;
        const int ak = TA ? t / SDC_TILE + e * SDC_NARROW_STEP : t % SDC_TILE_K;
        as[ak * SDC_TILE_PAD + ai] = ra[e];
        const int bj = TB ? t / SDC_TILE_K + e * SDC_WIDE_STEP : t % SDC_TILE;
        const int bk = TB ? t % SDC_TILE_K : t / SDC_TILE + e * SDC_NARROW_STEP;
        bs[bk * SDC_TILE_PAD + bj] = rb[e];
    }
}

/*
 * Where a plan's scratch (sdc_tiled_scratch_bytes, zeroed once) keeps what
 * blocks hand each other: for SDC_EPI_DRELU_BGRAD over several rows of
 * tiles, a counter per column of tiles and a tile row's column sums (rows x
 * n floats); with a split of k over `split` blocks a tile (split > 1), a
 * counter per tile and each block's partial tile (split x tiles x 32 x 32
 * floats), last, so that the counters sit at the same place for every
 * split. A counter is reset by the block that finds itself last, so the
 * scratch is ready for the next call (and for a graph's replays).
 */
typedef struct {
    unsigned *col_count;
    float *col_part;
    unsigned *tile_count;
    float *tiles;
} sdc_tiled_scratch;

static int64_t sdc_tiled_layout(const sdc_lt_args *g, int split, char *base, sdc_tiled_scratch *out) {
    const int64_t rows = (g->m + SDC_TILE - 1) / SDC_TILE, cols = (g->n + SDC_TILE - 1) / SDC_TILE;
    int64_t at = 0;
    sdc_tiled_scratch s = {NULL, NULL, NULL, NULL};
    if (g->epilogue == SDC_EPI_DRELU_BGRAD && rows > 1) {
        s.col_count = (unsigned *)(base ? base + at : NULL);
        at += cols * (int64_t)sizeof(unsigned);
        s.col_part = (float *)(base ? base + at : NULL);
        at += rows * g->n * (int64_t)sizeof(float);
    }
    if (split > 1) {
        s.tile_count = (unsigned *)(base ? base + at : NULL);
        at += rows * cols * (int64_t)sizeof(unsigned);
        s.tiles = (float *)(base ? base + at : NULL);
        at += (int64_t)split * rows * cols * SDC_TILE * SDC_TILE * (int64_t)sizeof(float);
    }
    if (out) *out = s;
    return at;
}

/* Whether this block is the last of the count's blocks (of total) to get
 * here; every thread of the block must call it, after writing what the last
 * one reads. */
static __device__ __forceinline__ bool sdc_tiled_last(unsigned *count, unsigned total, bool *flag) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) *flag = atomicAdd(count, 1u) == total - 1;
    __syncthreads();
    if (!*flag) return false;
    __threadfence();
    if (threadIdx.x == 0) *count = 0; /* ready for the next call: no other block touches it now */
    return true;
}

template <bool TA, bool TB>
__global__ void __launch_bounds__(SDC_TILE_THREADS, 2)
    sdc_tiled_kernel(const float *__restrict__ a, int64_t lda, const float *__restrict__ b, int64_t ldb,
                     float *__restrict__ c, int64_t ldc, int m, int n, int k, int k_split, int epi, float *bias,
                     uint32_t *aux, int64_t aux_ld, sdc_tiled_scratch sc) {
    sdc_wait_prior_grid();
    /* The slabs, then (after the last one) the groups' partial tiles. */
    __shared__ __align__(16) float smem[2 * SDC_TILE_K * SDC_TILE_PAD];
    __shared__ bool last;
    static_assert(SDC_TILE_GROUPS * SDC_TILE * SDC_TILE_PAD <= 2 * SDC_TILE_K * SDC_TILE_PAD, "partials fit");
    float *as = smem, *bs = smem + SDC_TILE_K * SDC_TILE_PAD;
    const int tid = threadIdx.x, grp = tid >> 6, tx = tid & 7, ty = (tid >> 3) & 7;
    const int i0 = blockIdx.y * SDC_TILE, j0 = blockIdx.x * SDC_TILE;
    /* This block's part of k: [k_begin, k_end), k_split a multiple of SDC_TILE_K. */
    const int k_begin = blockIdx.z * k_split, k_end = min(k, k_begin + k_split);
    const bool row_sums = epi == SDC_EPI_BGRAD_A && blockIdx.x == 0; /* never split */
    float acc[4][4];
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int q = 0; q < 4; q++) acc[r][q] = 0.0f;
    float rsum = 0.0f; /* row_sums: thread tid < 32 sums row i0 + tid of op(A) */
    float ra[SDC_TILE_LOADS], rb[SDC_TILE_LOADS];
    sdc_tile_load<TA, TB>(a, lda, b, ldb, m, n, k_end, i0, j0, k_begin, ra, rb);
    for (int k0 = k_begin; k0 < k_end; k0 += SDC_TILE_K) {
        sdc_tile_store<TA, TB>(as, bs, ra, rb);
        __syncthreads();
        if (k0 + SDC_TILE_K < k_end)
            sdc_tile_load<TA, TB>(a, lda, b, ldb, m, n, k_end, i0, j0, k0 + SDC_TILE_K, ra, rb);
        const int kk0 = grp * (SDC_TILE_K / SDC_TILE_GROUPS);
#pragma unroll 1 /* more would spill at 64 registers */
        for (int kk = kk0; kk < kk0 + SDC_TILE_K / SDC_TILE_GROUPS; kk++) {
            const float4 a4 = *reinterpret_cast<const float4 *>(as + kk * SDC_TILE_PAD + ty * 4);
            const float4 b4 = *reinterpret_cast<const float4 *>(bs + kk * SDC_TILE_PAD + tx * 4);
            const float av[4] = {a4.x, a4.y, a4.z, a4.w}, bv[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int q = 0; q < 4; q++) acc[r][q] = fmaf(av[r], bv[q], acc[r][q]);
        }
        if (row_sums && tid < SDC_TILE)
            for (int kk = 0; kk < SDC_TILE_K; kk++) rsum += as[kk * SDC_TILE_PAD + tid];
        __syncthreads();
    }
    /* The groups' partial tiles, added in group order into red's first
     * tile: (rr, lane) by the thread that owns it in the epilogue below. */
    float *red = smem;
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int q = 0; q < 4; q++) red[(grp * SDC_TILE + ty * 4 + r) * SDC_TILE_PAD + tx * 4 + q] = acc[r][q];
    __syncthreads();
    const int lane = tid & 31, warp = tid >> 5, j = j0 + lane;
    const int rows_per_warp_step = SDC_TILE_THREADS / 32;
    for (int rr = warp; rr < SDC_TILE; rr += rows_per_warp_step) {
        float v = red[rr * SDC_TILE_PAD + lane];
#pragma unroll
        for (int g = 1; g < SDC_TILE_GROUPS; g++) v += red[(g * SDC_TILE + rr) * SDC_TILE_PAD + lane];
        red[rr * SDC_TILE_PAD + lane] = v;
    }
    if (gridDim.z > 1) {
        /* Split k: every block stores its partial tile; the tile's last
         * block adds them in split order. */
        const int64_t tile = (int64_t)blockIdx.y * gridDim.x + blockIdx.x;
        float *mine = sc.tiles + (tile * gridDim.z + blockIdx.z) * (SDC_TILE * SDC_TILE);
        for (int rr = warp; rr < SDC_TILE; rr += rows_per_warp_step)
            mine[rr * SDC_TILE + lane] = red[rr * SDC_TILE_PAD + lane];
        if (!sdc_tiled_last(sc.tile_count + tile, gridDim.z, &last)) return;
        const float *all = sc.tiles + tile * gridDim.z * (SDC_TILE * SDC_TILE);
        for (int rr = warp; rr < SDC_TILE; rr += rows_per_warp_step) {
            float v = 0.0f;
            for (unsigned z = 0; z < gridDim.z; z++)
                v += __ldcg(all + z * (SDC_TILE * SDC_TILE) + rr * SDC_TILE + lane);
            red[rr * SDC_TILE_PAD + lane] = v;
        }
    }
    /* The epilogue: a warp a row, a lane a column. */
    const bool has_bias = epi == SDC_EPI_BIAS || epi == SDC_EPI_BIAS_RELU || epi == SDC_EPI_BIAS_RELU_AUX;
    const bool relu = epi == SDC_EPI_BIAS_RELU || epi == SDC_EPI_BIAS_RELU_AUX;
    const float bj = (has_bias && j < n) ? bias[j] : 0.0f;
    for (int rr = warp; rr < SDC_TILE; rr += rows_per_warp_step) {
        const int i = i0 + rr;
        const bool in = i < m && j < n;
        float v = red[rr * SDC_TILE_PAD + lane];
        if (has_bias) v += bj;
        if (epi == SDC_EPI_BIAS_RELU_AUX) {
            const unsigned word = __ballot_sync(0xffffffffu, in && v > 0.0f);
            if (lane == 0 && i < m) aux[((int64_t)i * aux_ld + j0) >> 5] = word;
        }
        if (relu) v = v > 0.0f ? v : 0.0f;
        if (epi == SDC_EPI_DRELU_BGRAD && in) {
            const int64_t bit = (int64_t)i * aux_ld + j;
            if (!((aux[bit >> 5] >> (bit & 31)) & 1u)) v = 0.0f;
        }
        if (in) c[(int64_t)i * ldc + j] = v;
        red[rr * SDC_TILE_PAD + lane] = in ? v : 0.0f; /* for the column sums */
    }
    if (row_sums && tid < SDC_TILE && i0 + tid < m) bias[i0 + tid] = rsum;
    if (epi != SDC_EPI_DRELU_BGRAD) return; /* the same for the whole block */
    /* The column sums: this tile's, in row order; then, over several rows
     * of tiles, the column's last tile adds the tiles' in row order. */
    __syncthreads();
    float s = 0.0f;
    if (tid < SDC_TILE)
        for (int rr = 0; rr < SDC_TILE; rr++) s += red[rr * SDC_TILE_PAD + tid];
    const bool col = tid < SDC_TILE && j0 + tid < n;
    if (gridDim.y == 1) {
        if (col) bias[j0 + tid] = s;
        return;
    }
    if (col) sc.col_part[(int64_t)blockIdx.y * n + j0 + tid] = s;
    if (!sdc_tiled_last(sc.col_count + blockIdx.x, gridDim.y, &last)) return;
    if (col) {
        float t = 0.0f;
        for (unsigned y = 0; y < gridDim.y; y++) t += __ldcg(sc.col_part + (int64_t)y * n + j0 + tid);
        bias[j0 + tid] = t;
    }
}

/* Splits of k the tuner tries beyond 1 (each at least one slab), while the
 * blocks stay within SDC_TILE_SPLIT_BLOCKS per SM: the point of a split is
 * filling the GPU when the product has few tiles. */
static const int sdc_tiled_splits[] = {2, 4};
#define SDC_TILE_SPLIT_BLOCKS 4

int sdc_tiled_max_split(const sdc_lt_args *g, int sm_count) {
    if (g->epilogue == SDC_EPI_BGRAD_A) return 1; /* its row sums are one block's */
    const int64_t tiles = ((g->m + SDC_TILE - 1) / SDC_TILE) * ((g->n + SDC_TILE - 1) / SDC_TILE);
    const int64_t slabs = (g->k + SDC_TILE_K - 1) / SDC_TILE_K;
    int best = 1;
    for (size_t i = 0; i < sizeof sdc_tiled_splits / sizeof sdc_tiled_splits[0]; i++) {
        const int s = sdc_tiled_splits[i];
        if (s <= slabs && tiles * s <= (int64_t)SDC_TILE_SPLIT_BLOCKS * (sm_count > 0 ? sm_count : 1)) best = s;
    }
    return best;
}

int64_t sdc_tiled_scratch_bytes(const sdc_lt_args *g, int split) { return sdc_tiled_layout(g, split, NULL, NULL); }

bool sdc_tiled_fits(const sdc_lt_args *g) {
    if (g->m <= 0 || g->n <= 0 || g->k <= 0) return false;
    if ((g->m + SDC_TILE - 1) / SDC_TILE > 65535 || g->m * g->n > ((int64_t)1 << 26) ||
        g->m * g->n * g->k > ((int64_t)1 << 28))
        return false; /* larger products are cuBLASLt's */
    const bool has_aux = g->epilogue == SDC_EPI_BIAS_RELU_AUX || g->epilogue == SDC_EPI_DRELU_BGRAD;
    return !has_aux || g->aux % 4 == 0;
}

cudaError_t sdc_tiled_launch(const sdc_lt_args *g, int split, void *scratch, int64_t scratch_bytes, const void *a,
                             const void *b, void *cm, cudaStream_t st) {
    if (split < 1 || (split > 1 && g->epilogue == SDC_EPI_BGRAD_A)) return cudaErrorInvalidValue;
    const int64_t slabs = (g->k + SDC_TILE_K - 1) / SDC_TILE_K;
    const int k_split = (int)((slabs + split - 1) / split) * SDC_TILE_K;
    split = (int)((g->k + k_split - 1) / k_split); /* no block without k */
    sdc_tiled_scratch sc;
    const int64_t need = sdc_tiled_layout(g, split, (char *)scratch, &sc);
    if (need > 0 && (!scratch || need > scratch_bytes)) return cudaErrorInvalidValue;
    const dim3 grid((unsigned)((g->n + SDC_TILE - 1) / SDC_TILE), (unsigned)((g->m + SDC_TILE - 1) / SDC_TILE),
                    (unsigned)split);
    const dim3 block(SDC_TILE_THREADS);
    const float *A = (const float *)a, *B = (const float *)b;
    float *C = (float *)cm, *bias = (float *)(uintptr_t)g->bias;
    uint32_t *aux = (uint32_t *)(uintptr_t)g->aux;
    void (*kernel)(const float *, int64_t, const float *, int64_t, float *, int64_t, int, int, int, int, int, float *,
                   uint32_t *, int64_t, sdc_tiled_scratch) =
        g->trans_a ? (g->trans_b ? sdc_tiled_kernel<true, true> : sdc_tiled_kernel<true, false>)
                   : (g->trans_b ? sdc_tiled_kernel<false, true> : sdc_tiled_kernel<false, false>);
    return sdc_launch(kernel, grid, block, st, A, g->lda, B, g->ldb, C, g->ldc, (int)g->m, (int)g->n, (int)g->k,
                      k_split, (int)g->epilogue, bias, aux, g->aux_ld, sc);
}
