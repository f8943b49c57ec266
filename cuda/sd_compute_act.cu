/*
 * sd_compute_act.cu: the fused bias + activation kernels of Linear layers.
 *
 *   sdc_bias_act           y = act(y + bias), in place, float4 when it can;
 *   sdc_bias_act_backward  dy *= act'(y), in place, and dbias = column sums of
 *                          dy, reduced deterministically.
 *
 * Column sums without float atomics. The rows are cut into C chunks and the
 * columns into tiles of 32; block (tile, chunk) has 32x8 threads: thread
 * (tx, ty) sums column tile*32+tx over rows chunk_start+ty, +8, ... in row
 * order, the block adds its 8 lanes in lane order and writes the partial
 * sum of its chunk to scratch[chunk][col]. The last block of a tile to finish
 * (an integer ticket per tile) adds the C partials of its columns in chunk
 * order and writes dbias, then resets the ticket. The order of every addition
 * depends only on the shape and the device's SM count, so every run and every
 * PE on the same kind of GPU gets the same bits.
 *
 * sdc_bias_act_backward on bf16 (SDC_BF16) takes the bf16 kernels below ("bf16").
 *
 * ReLU follows Go's max(v, 0): NaN stays NaN, -0 becomes +0. Its derivative is
 * taken from the output: 0 where y <= 0 (the subgradient at 0 is 0).
 */
#include "sd_bf16.cuh"
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

#define SDC_ACT_THREADS 256
/* Column tiles of the backward kernel: 32 columns by 8 row lanes. */
#define SDC_TILE_COLS 32
#define SDC_TILE_LANES 8
/* Counters [SDC_TILE_COUNTER0, SDC_COUNTERS) are the per-tile tickets. */
#define SDC_TILE_COUNTER0 16
/* A chunk has at least this many rows. */
#define SDC_MIN_CHUNK_ROWS 32

static __device__ __forceinline__ float sdc_relu(float v) { return (v > 0.0f || v != v) ? v : 0.0f; }

template <int ACT>
static __device__ __forceinline__ float sdc_apply(float v, float b, bool has_bias) {
    if (has_bias) v = __fadd_rn(v, b);
    return ACT == SDC_RELU ? sdc_relu(v) : v;
}

/* y (rows,cols) as n floats; bias (cols) or NULL. Grid-stride over elements. */
template <int ACT, typename I>
__global__ void sdc_bias_act_kernel(float *__restrict__ y, const float *__restrict__ bias, I n,
                                    I cols) {
    const bool has_bias = bias != NULL;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        const float b = has_bias ? bias[i % cols] : 0.0f;
        y[i] = sdc_apply<ACT>(y[i], b, has_bias);
    }
}

/* The same over float4 vectors: cols % 4 == 0 and y, bias 16-byte aligned. */
template <int ACT, typename I>
__global__ void sdc_bias_act_kernel4(float4 *__restrict__ y, const float4 *__restrict__ bias,
                                     I nvec, I cvec) {
    const bool has_bias = bias != NULL;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += (I)gridDim.x * blockDim.x) {
        float4 v = y[i];
        const float4 b = has_bias ? bias[i % cvec] : make_float4(0, 0, 0, 0);
        v.x = sdc_apply<ACT>(v.x, b.x, has_bias);
        v.y = sdc_apply<ACT>(v.y, b.y, has_bias);
        v.z = sdc_apply<ACT>(v.z, b.z, has_bias);
        v.w = sdc_apply<ACT>(v.w, b.w, has_bias);
        y[i] = v;
    }
}

/* dy (n) = 0 where y <= 0 (ReLU mask without a bias gradient). */
template <typename I>
__global__ void sdc_relu_mask_kernel(float *__restrict__ dy, const float *__restrict__ y, I n) {
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x)
        if (y[i] <= 0.0f) dy[i] = 0.0f;
}

static unsigned sdc_blocks(int64_t items, int sm_count) {
    return (unsigned)sdc_grid(items, SDC_ACT_THREADS, sm_count, 16);
}

template <int ACT>
static void sdc_launch_bias_act(const sdc_ctx *c, float *y, const float *bias, int64_t rows,
                                int64_t cols) {
    cudaStream_t s = (cudaStream_t)(uintptr_t)c->stream;
    const int64_t n = rows * cols;
    const bool vec = cols % 4 == 0 && ((uintptr_t)y % 16) == 0 && ((uintptr_t)bias % 16) == 0;
    const bool small = n < ((int64_t)1 << 31);
    if (vec) {
        const int64_t nv = n / 4;
        const unsigned g = sdc_blocks(nv, c->sm_count);
        if (small)
            sdc_bias_act_kernel4<ACT, uint32_t><<<g, SDC_ACT_THREADS, 0, s>>>(
                (float4 *)y, (const float4 *)bias, (uint32_t)nv, (uint32_t)(cols / 4));
        else
            sdc_bias_act_kernel4<ACT, uint64_t><<<g, SDC_ACT_THREADS, 0, s>>>(
                (float4 *)y, (const float4 *)bias, (uint64_t)nv, (uint64_t)(cols / 4));
        return;
    }
    const unsigned g = sdc_blocks(n, c->sm_count);
    if (small)
        sdc_bias_act_kernel<ACT, uint32_t><<<g, SDC_ACT_THREADS, 0, s>>>(y, bias, (uint32_t)n,
                                                                         (uint32_t)cols);
    else
        sdc_bias_act_kernel<ACT, uint64_t><<<g, SDC_ACT_THREADS, 0, s>>>(y, bias, (uint64_t)n,
                                                                         (uint64_t)cols);
}

extern "C" int sdc_bias_act(const sdc_ctx *c, uint64_t y, int64_t rows, int64_t cols, uint64_t bias,
                            int32_t act) {
    if (!c || rows < 0 || cols <= 0) return SD_FAIL(SD_ERR_ARG, "sdc_bias_act: bad arguments");
    if (act != SDC_IDENTITY && act != SDC_RELU)
        return SD_FAIL(SD_ERR_ARG, "sdc_bias_act: unknown activation %d", act);
    if (rows == 0 || (act == SDC_IDENTITY && !bias)) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    float *yp = (float *)(uintptr_t)y;
    const float *bp = (const float *)(uintptr_t)bias;
    if (act == SDC_RELU)
        sdc_launch_bias_act<SDC_RELU>(c, yp, bp, rows, cols);
    else
        sdc_launch_bias_act<SDC_IDENTITY>(c, yp, bp, rows, cols);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/*
 * Block (tile, chunk) of the backward: see the file comment. dy, y are
 * (rows,cols); partial is [chunks][cols]; tickets one per tile.
 */
template <int ACT>
__global__ void __launch_bounds__(SDC_TILE_COLS *SDC_TILE_LANES)
    sdc_bias_act_backward_kernel(float *__restrict__ dy, const float *__restrict__ y, int64_t rows,
                                 int64_t cols, int64_t chunk_rows, float *__restrict__ partial,
                                 uint32_t *tickets, float *__restrict__ dbias, int accumulate) {
    __shared__ float lane_sum[SDC_TILE_LANES][SDC_TILE_COLS + 1];
    __shared__ uint32_t ticket;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t col = (int64_t)blockIdx.x * SDC_TILE_COLS + tx;
    const int64_t r0 = (int64_t)blockIdx.y * chunk_rows;
    const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    const unsigned chunks = gridDim.y;

    float acc = 0.0f;
    if (col < cols) {
        for (int64_t r = r0 + ty; r < r1; r += SDC_TILE_LANES) {
            const int64_t i = r * cols + col;
            float v = dy[i];
            if (ACT == SDC_RELU && y[i] <= 0.0f) {
                v = 0.0f;
                dy[i] = 0.0f;
            }
            acc = __fadd_rn(acc, v);
        }
    }
    lane_sum[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && col < cols) {
        float s = lane_sum[0][tx];
        for (int l = 1; l < SDC_TILE_LANES; l++) s = __fadd_rn(s, lane_sum[l][tx]);
        partial[(int64_t)blockIdx.y * cols + col] = s;
    }
    /* Publish the partials, then take a ticket: the last block of the tile finishes it. */
    __threadfence();
    __syncthreads();
    if (tx == 0 && ty == 0) ticket = atomicAdd(&tickets[blockIdx.x], 1u);
    __syncthreads();
    if (ticket != chunks - 1) return;
    __threadfence();
    if (ty == 0 && col < cols) {
        float s = __ldcg(&partial[col]);
        for (unsigned k = 1; k < chunks; k++) s = __fadd_rn(s, __ldcg(&partial[(int64_t)k * cols + col]));
        dbias[col] = accumulate ? __fadd_rn(dbias[col], s) : s;
    }
    if (tx == 0 && ty == 0) tickets[blockIdx.x] = 0;
}

/* ---- bf16 ---- */

/*
 * The bf16 bias gradient of a Linear layer, dbias (OC) fp32 = column sums of
 * dout (N,OC) bf16, deterministically, written. The bf16 Linear takes it
 * beside plain dW GEMMs: at GPT-2's shapes it costs less than cuBLASLt's
 * BGRAD_A epilogue adds to them (gptcheck's timings). It is other arithmetic
 * than the fp32 kernel (its own chunks and partials in the caller's scratch,
 * no tickets), and takes no activation.
 *
 * Partials (block 32 x 8 threads, grid (OC/256, G)): lane x owns 8 columns
 * (one 16-byte vector), block row y sums rows y, y+8, ... of the block's
 * chunk of R rows (chunk blockIdx.y: rows blockIdx.y*R ..), the loads
 * unrolled so that several are in flight per thread; the block adds its 8
 * rows in order into one partial per (chunk, column). Then the reduction
 * (block 32 x 8, grid OC/32): thread (x, y) adds the partials of chunks y,
 * y+8, ... of column 32 blockIdx.x + x in that order, and the 8 sums are
 * added in y order into dbias. G and R depend only on N, so the order of
 * every sum, and the bits, repeat.
 *
 * The chunks are short (64 rows up to 32768 rows, then G stays 512) so that
 * a narrow dout (768 columns: 3 blocks across) still spreads over the GPU:
 * with 64 chunks of 256 rows, each thread waited on 32 loads in a row and the
 * reduction's 3 blocks on 64 each.
 */

#define SDC_BIASB_ROWS 8         /* thread rows per block */
#define SDC_BIASB_CHUNK 64       /* rows per chunk, at least */
#define SDC_BIASB_MAX_CHUNKS 512 /* gridDim.y: the partials */

static int sdc_biasb_chunks(int N) {
    const int c = (N + SDC_BIASB_CHUNK - 1) / SDC_BIASB_CHUNK;
    return c < 1 ? 1 : (c > SDC_BIASB_MAX_CHUNKS ? SDC_BIASB_MAX_CHUNKS : c);
}

/* rows per chunk: a multiple of 8, G chunks cover N */
static int sdc_biasb_chunk_rows(int N, int G) {
    const int r = (N + G - 1) / G;
    return (r + SDC_BIASB_ROWS - 1) / SDC_BIASB_ROWS * SDC_BIASB_ROWS;
}

__global__ void __launch_bounds__(32 * SDC_BIASB_ROWS)
    sdc_biasb_bwd_kernel(float *__restrict__ partial, const bf16 *__restrict__ dout, int N, int OC, int R) {
    __shared__ float sm[SDC_BIASB_ROWS][32 * 8 + 4];
    const int lane = threadIdx.x, y = threadIdx.y;
    const int v = blockIdx.x * 32 + lane;
    const bool on = v < (OC >> 3);
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (on) {
        const int r0 = blockIdx.y * R, r1 = min(r0 + R, N);
        const bf16 *p = dout + 8 * (size_t)v;
        int r = r0 + y;
        /* eight rows a round (a chunk of 64 rows is one round): the loads
         * first, then the adds in row order */
        for (; r + 7 * SDC_BIASB_ROWS < r1; r += 8 * SDC_BIASB_ROWS) {
            uint4 u[8];
#pragma unroll
            for (int i = 0; i < 8; i++)
                u[i] = *reinterpret_cast<const uint4 *>(p + (size_t)(r + i * SDC_BIASB_ROWS) * OC);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                float f[8];
                sdb_unpack8(u[i], f);
#pragma unroll
                for (int k = 0; k < 8; k++) acc[k] += f[k];
            }
        }
        for (; r < r1; r += SDC_BIASB_ROWS) {
            float f[8];
            sdb_load8(p + (size_t)r * OC, f);
#pragma unroll
            for (int k = 0; k < 8; k++) acc[k] += f[k];
        }
    }
#pragma unroll
    for (int k = 0; k < 8; k++) sm[y][8 * lane + k] = acc[k];
    __syncthreads();
    /* 256 threads, 256 columns of the block: thread t sums column t over the 8 rows */
    const int t = y * 32 + lane;
    const int col = blockIdx.x * 256 + t;
    if (col < OC) {
        float s = 0.f;
#pragma unroll
        for (int k = 0; k < SDC_BIASB_ROWS; k++) s += sm[k][t];
        partial[(size_t)blockIdx.y * OC + col] = s;
    }
}

__global__ void __launch_bounds__(32 * SDC_BIASB_ROWS)
    sdc_biasb_bwd_reduce_kernel(float *__restrict__ dbias, const float *__restrict__ partial, int G, int OC) {
    __shared__ float sm[SDC_BIASB_ROWS][33];
    const int lane = threadIdx.x, y = threadIdx.y;
    const int c = blockIdx.x * 32 + lane;
    float s = 0.f;
    if (c < OC) {
        int g = y;
        for (; g + 3 * SDC_BIASB_ROWS < G; g += 4 * SDC_BIASB_ROWS) {
            float f[4];
#pragma unroll
            for (int i = 0; i < 4; i++) f[i] = partial[(size_t)(g + i * SDC_BIASB_ROWS) * OC + c];
#pragma unroll
            for (int i = 0; i < 4; i++) s += f[i];
        }
        for (; g < G; g += SDC_BIASB_ROWS) s += partial[(size_t)g * OC + c];
    }
    sm[y][lane] = s;
    __syncthreads();
    if (y == 0 && c < OC) {
        float t = 0.f;
#pragma unroll
        for (int k = 0; k < SDC_BIASB_ROWS; k++) t += sm[k][lane];
        dbias[c] = t;
    }
}

static size_t sdc_biasb_scratch_bytes(int64_t N, int64_t OC) {
    if (N <= 0 || OC <= 0 || N > 0x7fffffff) return 0;
    return (size_t)sdc_biasb_chunks((int)N) * (size_t)OC * sizeof(float);
}

static int sdc_bias_backward_bf16(cudaStream_t s, uint64_t dout, int64_t rows, int64_t cols, uint64_t dbias,
                                  int32_t act, int32_t accumulate, uint64_t scratch) {
    if (rows <= 0 || cols <= 0 || cols % 8 != 0 || rows > 0x7fffffff || cols > 0x7fffffff)
        return SD_FAIL(SD_ERR_ARG, "sdc_bias_act_backward: bf16: N=%lld OC=%lld (OC a multiple of 8)", (long long)rows,
                       (long long)cols);
    if (!dbias || !dout || !scratch || dout % 16)
        return SD_FAIL(SD_ERR_ARG, "sdc_bias_act_backward: bf16: NULL or unaligned pointer");
    if (act != SDC_IDENTITY || accumulate)
        return SD_FAIL(SD_ERR_ARG, "sdc_bias_act_backward: bf16: the bias gradient alone (identity, written)");
    const int N = (int)rows, OC = (int)cols;
    const int G = sdc_biasb_chunks(N), R = sdc_biasb_chunk_rows(N, G);
    dim3 grid((unsigned)((OC + 255) / 256), (unsigned)G), block(32, SDC_BIASB_ROWS);
    sdc_biasb_bwd_kernel<<<grid, block, 0, s>>>((float *)(uintptr_t)scratch, (const bf16 *)(uintptr_t)dout, N, OC, R);
    SD_CUDA(cudaGetLastError());
    sdc_biasb_bwd_reduce_kernel<<<(OC + 31) / 32, block, 0, s>>>((float *)(uintptr_t)dbias,
                                                                 (const float *)(uintptr_t)scratch, G, OC);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_bias_act_backward_scratch_bytes(sdc_dtype dtype, int64_t rows, int64_t cols, int64_t *bytes) {
    if (!bytes || (dtype != SDC_F32 && dtype != SDC_BF16))
        return SD_FAIL(SD_ERR_ARG, "sdc_bias_act_backward_scratch_bytes: bad arguments");
    *bytes = dtype == SDC_BF16 ? (int64_t)sdc_biasb_scratch_bytes(rows, cols) : 0;
    return SD_OK;
}

/* ---- launchers ---- */

extern "C" int sdc_bias_act_backward(const sdc_ctx *c, sdc_dtype dtype, uint64_t dy, uint64_t y, int64_t rows,
                                     int64_t cols, uint64_t dbias, int32_t act, int32_t accumulate, uint64_t scratch) {
    if (c && dtype == SDC_BF16) {
        SD_TRY(sdc_use_device(c->device));
        return sdc_bias_backward_bf16((cudaStream_t)(uintptr_t)c->stream, dy, rows, cols, dbias, act, accumulate,
                                      scratch);
    }
    if (!c || dtype != SDC_F32 || rows < 0 || cols <= 0) return SD_FAIL(SD_ERR_ARG, "sdc_bias_act_backward: bad arguments");
    if (act != SDC_IDENTITY && act != SDC_RELU)
        return SD_FAIL(SD_ERR_ARG, "sdc_bias_act_backward: unknown activation %d", act);
    SD_TRY(sdc_use_device(c->device));
    cudaStream_t s = (cudaStream_t)(uintptr_t)c->stream;
    float *dyp = (float *)(uintptr_t)dy;
    const float *yp = (const float *)(uintptr_t)y;
    if (!dbias) {
        if (act == SDC_RELU && rows > 0) {
            const int64_t n = rows * cols;
            const unsigned g = sdc_blocks(n, c->sm_count);
            if (n < ((int64_t)1 << 31))
                sdc_relu_mask_kernel<uint32_t><<<g, SDC_ACT_THREADS, 0, s>>>(dyp, yp, (uint32_t)n);
            else
                sdc_relu_mask_kernel<uint64_t><<<g, SDC_ACT_THREADS, 0, s>>>(dyp, yp, (uint64_t)n);
            SD_CUDA(cudaGetLastError());
        }
        return SD_OK;
    }
    if (rows == 0) {
        if (!accumulate) SD_CUDA(cudaMemsetAsync((void *)(uintptr_t)dbias, 0, (size_t)cols * sizeof(float), s));
        return SD_OK;
    }
    const int64_t tiles = (cols + SDC_TILE_COLS - 1) / SDC_TILE_COLS;
    if (tiles > SDC_COUNTERS - SDC_TILE_COUNTER0 || tiles > 2147483647LL)
        return SD_FAIL(SD_ERR_ARG, "sdc_bias_act_backward: %lld columns, at most %lld", (long long)cols,
                       (long long)(SDC_COUNTERS - SDC_TILE_COUNTER0) * SDC_TILE_COLS);
    /* Enough blocks to fill the GPU, chunks of at least SDC_MIN_CHUNK_ROWS rows,
     * and partials that fit the scratch. */
    int64_t chunks = ((int64_t)4 * (c->sm_count > 0 ? c->sm_count : 1) + tiles - 1) / tiles;
    const int64_t by_rows = (rows + SDC_MIN_CHUNK_ROWS - 1) / SDC_MIN_CHUNK_ROWS;
    const int64_t by_scratch = c->scratch_bytes / (int64_t)sizeof(float) / cols;
    if (chunks > by_rows) chunks = by_rows;
    if (chunks > by_scratch) chunks = by_scratch;
    if (chunks > 65535) chunks = 65535;
    if (chunks < 1)
        return SD_FAIL(SD_ERR_ARG, "sdc_bias_act_backward: %lld columns do not fit the scratch",
                       (long long)cols);
    const int64_t chunk_rows = (rows + chunks - 1) / chunks;
    chunks = (rows + chunk_rows - 1) / chunk_rows; /* no empty chunk */
    const dim3 grid((unsigned)tiles, (unsigned)chunks);
    const dim3 block(SDC_TILE_COLS, SDC_TILE_LANES);
    float *partial = (float *)(uintptr_t)c->scratch;
    uint32_t *tickets = (uint32_t *)(uintptr_t)c->counters + SDC_TILE_COUNTER0;
    float *db = (float *)(uintptr_t)dbias;
    if (act == SDC_RELU)
        sdc_bias_act_backward_kernel<SDC_RELU><<<grid, block, 0, s>>>(
            dyp, yp, rows, cols, chunk_rows, partial, tickets, db, accumulate);
    else
        sdc_bias_act_backward_kernel<SDC_IDENTITY><<<grid, block, 0, s>>>(
            dyp, yp, rows, cols, chunk_rows, partial, tickets, db, accumulate);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
