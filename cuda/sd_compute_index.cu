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
 */
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
