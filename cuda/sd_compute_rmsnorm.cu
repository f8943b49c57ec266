/*
 * sd_compute_rmsnorm.cu: root-mean-square normalisation over rows
 * (compute.RMSNorms, a Llama block's norm), forward and backward, in fp32
 * with the CPU engine's bits and in bf16 with fp32 statistics: one set of
 * kernels, templates over the element type T (float, or sdc_bf16 read
 * exactly and stored rounded: sd_compute.cuh) and the lanes L that share a
 * row, and one launcher per direction taking the dtype.
 *
 * A row goes to L lanes of a warp: eight in fp32, which do
 * internal/hostloops' RMSNorm and RMSNormBackward in their order, as the
 * layer norm's kernels do (sd_compute_layernorm.cu); a whole warp (32) in
 * bf16. Lane a adds the rounded products of the elements a, a+L, ... of the
 * row's leading multiple of L, the L partials are added pairwise,
 * neighbours first (sdc_sum_lanes: for L = 8 hostloops' sum8 tree
 * ((0+1)+(2+3))+((4+5)+(6+7))), and the products of the elements past the
 * multiple of L (lane a computes tail element a, every lane gets them by
 * shuffle) are added one by one after them. Every operation is a
 * round-to-nearest intrinsic, so nvcc fuses no multiply and add; the square
 * root and the divisions are IEEE's. In bf16 every element is widened to
 * float on load and every result rounded to bf16 once, on its store (dx:
 * the sum dx + gx in float, then rounded, when adding); rstd and dw are
 * fp32. compute/cuda/cudatest emulates these operations in this order.
 *
 * The backward's dw is a sum over the rows, in chunks of rows: a thread a
 * column adds the rows of its chunk in row order from 0, and a second pass
 * adds the chunks' partial sums in chunk order. fp32 takes one chunk of all
 * the rows, written straight into dw, as the CPU loop adds them (its bits);
 * bf16 takes chunks of SDC_RMS_DW_CHUNK rows (fewer, longer ones where the
 * context's scratch, which holds the partials, is too small), so that more
 * than one column's worth of threads works on it.
 */
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

#define SDC_RMS_THREADS 256    /* 256 / L rows a block */
#define SDC_RMS_COL_THREADS 32 /* the dw kernels: a warp of columns a block */
#define SDC_RMS_DW_CHUNK 128   /* bf16: rows a dw partial sums */
#define SDC_RMS_SUM_THREADS 256 /* dw's second pass: 32 columns a block */
#define SDC_RMS_SUM_TILE 64     /* dw's second pass: chunks staged at a time */

/* The lanes a row takes: eight in fp32 (hostloops' lanes), a warp in bf16. */
template <typename T> struct sdc_rms_lanes { static const int value = 32; };
template <> struct sdc_rms_lanes<float> { static const int value = 8; };

/* y, rstd of rows rows of cols: RMSNorm's operations in its order. */
template <typename T, int L>
__global__ void __launch_bounds__(SDC_RMS_THREADS)
    sdc_rms_norm_kernel(T *__restrict__ y, float *__restrict__ rstd, const T *__restrict__ x,
                        const T *__restrict__ w, int64_t rows, int64_t cols, float eps) {
    const int lane = threadIdx.x & (L - 1);
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / L;
    const bool ok = row < rows; /* the lanes of a row past the end still shuffle */
    const T *xr = x + (ok ? row : 0) * cols;
    const int64_t lead = cols & ~(int64_t)(L - 1);
    const int ntail = (int)(cols - lead);

    /* dot(x, x): each square rounded before it is added */
    float a = 0.0f;
    if (ok)
        for (int64_t j = lane; j < lead; j += L) {
            const float v = sdc_ld(xr + j);
            a = __fadd_rn(a, __fmul_rn(v, v));
        }
    /* the tail (fewer than L elements): lane a squares element lead+a */
    float sq = 0.0f;
    if (ok && lane < ntail) {
        const float v = sdc_ld(xr + lead + lane);
        sq = __fmul_rn(v, v);
    }
    const float s = sdc_sum_lanes<L>(a, sq, ntail);
    /* rstd32: 1 / sqrt(v + eps), v = s / c, the square root correctly rounded */
    const float rs = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(s, (float)cols), eps)));
    if (!ok) return;

    T *yr = y + row * cols;
    for (int64_t j = lane; j < cols; j += L) sdc_st(yr + j, __fmul_rn(__fmul_rn(sdc_ld(xr + j), rs), sdc_ld(w + j)));
    if (lane == 0) rstd[row] = rs;
}

/*
 * dx of rows rows: RMSNormBackward's row sum of g*n (g = w*dy, n = x*r) in
 * the lanes' order, m = sum / c, then gx = (g - n*m) * r, written or added.
 */
template <typename T, int L>
__global__ void __launch_bounds__(SDC_RMS_THREADS)
    sdc_rms_norm_dx_kernel(T *__restrict__ dx, const T *__restrict__ dy, const T *__restrict__ x,
                           const T *__restrict__ w, const float *__restrict__ rstd, int64_t rows, int64_t cols,
                           int add_dx) {
    const int lane = threadIdx.x & (L - 1);
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / L;
    const bool ok = row < rows;
    const int64_t r = ok ? row : 0;
    const T *xr = x + r * cols, *dyr = dy + r * cols;
    const float rs = rstd[r];
    const int64_t lead = cols & ~(int64_t)(L - 1);
    const int ntail = (int)(cols - lead);

    float a = 0.0f;
    if (ok)
        for (int64_t j = lane; j < lead; j += L)
            a = __fadd_rn(a, __fmul_rn(__fmul_rn(sdc_ld(w + j), sdc_ld(dyr + j)), __fmul_rn(sdc_ld(xr + j), rs)));
    /* the tail's g*n, lane a computing element lead+a */
    float tgn = 0.0f;
    if (ok && lane < ntail) {
        const int64_t j = lead + lane;
        tgn = __fmul_rn(__fmul_rn(sdc_ld(w + j), sdc_ld(dyr + j)), __fmul_rn(sdc_ld(xr + j), rs));
    }
    const float s = sdc_sum_lanes<L>(a, tgn, ntail);
    if (!ok) return;

    const float m = __fdiv_rn(s, (float)cols);
    T *dxr = dx + row * cols;
    for (int64_t j = lane; j < cols; j += L) {
        const float n = __fmul_rn(sdc_ld(xr + j), rs);
        const float g = __fmul_rn(sdc_ld(w + j), sdc_ld(dyr + j));
        const float gx = __fmul_rn(__fsub_rn(g, __fmul_rn(n, m)), rs);
        sdc_st(dxr + j, add_dx ? __fadd_rn(sdc_ld(dxr + j), gx) : gx);
    }
}

/*
 * dw's first pass: the block (column block, chunk k) sums, per column j, n*dy
 * (n = x*r) over the rows [k*chunk_rows, min((k+1)*chunk_rows, rows)) from 0
 * in row order, into out[k*cols + j] (dw itself when there is one chunk).
 */
template <typename T>
__global__ void __launch_bounds__(SDC_RMS_COL_THREADS)
    sdc_rms_norm_dw_kernel(float *__restrict__ out, const T *__restrict__ dy, const T *__restrict__ x,
                           const float *__restrict__ rstd, int64_t rows, int64_t cols, int64_t chunk_rows) {
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    const int64_t r0 = (int64_t)blockIdx.y * chunk_rows;
    const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    float sw = 0.0f;
#pragma unroll 8
    for (int64_t r = r0; r < r1; r++) {
        const float n = __fmul_rn(sdc_ld(x + r * cols + j), rstd[r]);
        sw = __fadd_rn(sw, __fmul_rn(n, sdc_ld(dy + r * cols + j)));
    }
    out[(int64_t)blockIdx.y * cols + j] = sw;
}

/*
 * The same first pass in bf16 where cols is even and x, dy are 4-byte
 * aligned: a thread takes two neighbouring columns with one 4-byte load of
 * each of x and dy a row, and sums each column as sdc_rms_norm_dw_kernel
 * does (the same bits, half the loads).
 */
__global__ void __launch_bounds__(SDC_RMS_COL_THREADS)
    sdc_rms_norm_dw2_kernel(float *__restrict__ out, const sdc_bf16 *__restrict__ dy, const sdc_bf16 *__restrict__ x,
                            const float *__restrict__ rstd, int64_t rows, int64_t cols, int64_t chunk_rows) {
    const int64_t j = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 2;
    if (j >= cols) return;
    const int64_t r0 = (int64_t)blockIdx.y * chunk_rows;
    const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll 8
    for (int64_t r = r0; r < r1; r++) {
        const uint32_t xv = *(const uint32_t *)(x + r * cols + j), dv = *(const uint32_t *)(dy + r * cols + j);
        const float rs = rstd[r];
        /* element j is the low half (little-endian), widened as sdc_ld widens it */
        const float n0 = __fmul_rn(__uint_as_float(xv << 16), rs);
        const float n1 = __fmul_rn(__uint_as_float(xv & 0xffff0000u), rs);
        s0 = __fadd_rn(s0, __fmul_rn(n0, __uint_as_float(dv << 16)));
        s1 = __fadd_rn(s1, __fmul_rn(n1, __uint_as_float(dv & 0xffff0000u)));
    }
    float *o = out + (int64_t)blockIdx.y * cols + j;
    o[0] = s0;
    o[1] = s1;
}

/*
 * dw's second pass: dw[j] = the chunks' partials of column j added in chunk
 * order. A block takes 32 columns: its warps copy a tile of
 * SDC_RMS_SUM_TILE chunks' partials into shared memory (coalesced, many
 * loads in flight), then its first warp adds them, a thread a column, in
 * chunk order from the first partial. The loads of a column one after the
 * other left the chain of adds waiting on memory (10 us at 128 chunks of 768).
 */
__global__ void __launch_bounds__(SDC_RMS_SUM_THREADS)
    sdc_rms_norm_dw_sum_kernel(float *__restrict__ dw, const float *__restrict__ part, int64_t chunks,
                               int64_t cols) {
    __shared__ float tile[SDC_RMS_SUM_TILE][32];
    const int c = threadIdx.x & 31, sub = threadIdx.x >> 5;
    const int64_t j = (int64_t)blockIdx.x * 32 + c;
    float s = 0.0f;
    for (int64_t k0 = 0; k0 < chunks; k0 += SDC_RMS_SUM_TILE) {
        const int kn = (int)(chunks - k0 < SDC_RMS_SUM_TILE ? chunks - k0 : SDC_RMS_SUM_TILE);
        for (int k = sub; k < kn; k += SDC_RMS_SUM_THREADS / 32)
            tile[k][c] = j < cols ? part[(k0 + k) * cols + j] : 0.0f;
        __syncthreads();
        if (sub == 0)
            for (int k = 0; k < kn; k++) s = k0 + k == 0 ? tile[0][c] : __fadd_rn(s, tile[k][c]);
        __syncthreads();
    }
    if (sub == 0 && j < cols) dw[j] = s;
}

static int64_t sdc_rms_blocks(int64_t rows, int lanes) {
    const int64_t per = SDC_RMS_THREADS / lanes;
    return (rows + per - 1) / per;
}

/* rows and cols that the kernels' grids and indices take. */
static bool sdc_rms_dims(int64_t rows, int64_t cols) {
    return rows > 0 && cols > 0 && sdc_rms_blocks(rows, 8) <= 0x7fffffff && rows <= INT64_MAX / cols &&
           (cols + SDC_RMS_COL_THREADS - 1) / SDC_RMS_COL_THREADS <= 0x7fffffff;
}

static bool sdc_rms_dtype(sdc_dtype dt) { return dt == SDC_F32 || dt == SDC_BF16; }

template <typename T>
static int sdc_rms_norm_run(const sdc_ctx *c, uint64_t y, uint64_t rstd, uint64_t x, uint64_t w, int64_t rows,
                            int64_t cols, float eps) {
    const int L = sdc_rms_lanes<T>::value;
    sdc_rms_norm_kernel<T, L><<<(unsigned)sdc_rms_blocks(rows, L), SDC_RMS_THREADS, 0,
                                (cudaStream_t)(uintptr_t)c->stream>>>(
        (T *)(uintptr_t)y, (float *)(uintptr_t)rstd, (const T *)(uintptr_t)x, (const T *)(uintptr_t)w, rows, cols,
        eps);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_rms_norm(const sdc_ctx *c, sdc_dtype dtype, uint64_t y, uint64_t rstd, uint64_t x, uint64_t w,
                            int64_t rows, int64_t cols, float eps) {
    if (!c || !sdc_rms_dtype(dtype) || !sdc_rms_dims(rows, cols) || !y || !rstd || !x || !w)
        return SD_FAIL(SD_ERR_ARG, "sdc_rms_norm: bad arguments (dtype %d, %lld rows of %lld)", (int)dtype,
                       (long long)rows, (long long)cols);
    SD_TRY(sdc_use_device(c->device));
    if (dtype == SDC_BF16) return sdc_rms_norm_run<sdc_bf16>(c, y, rstd, x, w, rows, cols, eps);
    return sdc_rms_norm_run<float>(c, y, rstd, x, w, rows, cols, eps);
}

/* The chunks of dw's sum: one of all the rows in fp32; in bf16 chunks of
 * SDC_RMS_DW_CHUNK rows, at most as many as the scratch holds partials of. */
static void sdc_rms_dw_chunks(sdc_dtype dtype, int64_t rows, int64_t cols, int64_t scratch_bytes,
                              int64_t *chunks, int64_t *chunk_rows) {
    *chunks = 1;
    *chunk_rows = rows;
    if (dtype != SDC_BF16) return;
    int64_t n = (rows + SDC_RMS_DW_CHUNK - 1) / SDC_RMS_DW_CHUNK;
    int64_t cap = scratch_bytes / (int64_t)sizeof(float) / cols;
    if (cap > 65535) cap = 65535;
    if (n > cap) n = cap < 1 ? 1 : cap;
    *chunk_rows = (rows + n - 1) / n;
    *chunks = (rows + *chunk_rows - 1) / *chunk_rows; /* no empty chunk */
}

template <typename T>
static int sdc_rms_norm_backward_run(const sdc_ctx *c, uint64_t dx, uint64_t dw, uint64_t dy, uint64_t x, uint64_t w,
                                     uint64_t rstd, int64_t rows, int64_t cols, int add_dx, int64_t chunks,
                                     int64_t chunk_rows) {
    const int L = sdc_rms_lanes<T>::value;
    const cudaStream_t st = (cudaStream_t)(uintptr_t)c->stream;
    sdc_rms_norm_dx_kernel<T, L><<<(unsigned)sdc_rms_blocks(rows, L), SDC_RMS_THREADS, 0, st>>>(
        (T *)(uintptr_t)dx, (const T *)(uintptr_t)dy, (const T *)(uintptr_t)x, (const T *)(uintptr_t)w,
        (const float *)(uintptr_t)rstd, rows, cols, add_dx);
    SD_CUDA(cudaGetLastError());
    const int64_t col_blocks = (cols + SDC_RMS_COL_THREADS - 1) / SDC_RMS_COL_THREADS;
    float *part = chunks == 1 ? (float *)(uintptr_t)dw : (float *)(uintptr_t)c->scratch;
    if (sizeof(T) == 2 && cols % 2 == 0 && x % 4 == 0 && dy % 4 == 0) {
        const int64_t pair_blocks = (cols / 2 + SDC_RMS_COL_THREADS - 1) / SDC_RMS_COL_THREADS;
        sdc_rms_norm_dw2_kernel<<<dim3((unsigned)pair_blocks, (unsigned)chunks), SDC_RMS_COL_THREADS, 0, st>>>(
            part, (const sdc_bf16 *)(uintptr_t)dy, (const sdc_bf16 *)(uintptr_t)x, (const float *)(uintptr_t)rstd,
            rows, cols, chunk_rows);
    } else {
        sdc_rms_norm_dw_kernel<T><<<dim3((unsigned)col_blocks, (unsigned)chunks), SDC_RMS_COL_THREADS, 0, st>>>(
            part, (const T *)(uintptr_t)dy, (const T *)(uintptr_t)x, (const float *)(uintptr_t)rstd, rows, cols,
            chunk_rows);
    }
    SD_CUDA(cudaGetLastError());
    if (chunks > 1) {
        sdc_rms_norm_dw_sum_kernel<<<(unsigned)((cols + 31) / 32), SDC_RMS_SUM_THREADS, 0, st>>>(
            (float *)(uintptr_t)dw, part, chunks, cols);
        SD_CUDA(cudaGetLastError());
    }
    return SD_OK;
}

extern "C" int sdc_rms_norm_backward(const sdc_ctx *c, sdc_dtype dtype, uint64_t dx, uint64_t dw, uint64_t dy,
                                     uint64_t x, uint64_t w, uint64_t rstd, int64_t rows, int64_t cols,
                                     sdc_flag add_dx) {
    if (!c || !sdc_rms_dtype(dtype) || !sdc_rms_dims(rows, cols) || !dx || !dw || !dy || !x || !w || !rstd)
        return SD_FAIL(SD_ERR_ARG, "sdc_rms_norm_backward: bad arguments (dtype %d, %lld rows of %lld)", (int)dtype,
                       (long long)rows, (long long)cols);
    SD_TRY(sdc_use_device(c->device));
    int64_t chunks = 1, chunk_rows = rows;
    sdc_rms_dw_chunks(dtype, rows, cols, c->scratch_bytes, &chunks, &chunk_rows);
    if (dtype == SDC_BF16)
        return sdc_rms_norm_backward_run<sdc_bf16>(c, dx, dw, dy, x, w, rstd, rows, cols, add_dx ? 1 : 0, chunks,
                                                   chunk_rows);
    return sdc_rms_norm_backward_run<float>(c, dx, dw, dy, x, w, rstd, rows, cols, add_dx ? 1 : 0, chunks,
                                            chunk_rows);
}
