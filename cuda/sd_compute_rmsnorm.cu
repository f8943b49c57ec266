/*
 * sd_compute_rmsnorm.cu: root-mean-square normalisation over float32 rows
 * (compute.RMSNorms, a Llama block's norm), forward and backward, with the
 * CPU engine's bits.
 *
 * A row goes to eight lanes of a warp (sd_compute.cuh), which do
 * internal/hostloops' RMSNorm and RMSNormBackward in their order, as the
 * layer norm's kernels do (sd_compute_layernorm.cu): lane a adds the
 * rounded products of the elements a, a+8, ... of the row's leading
 * multiple of eight, the eight partials are added as
 * ((0+1)+(2+3))+((4+5)+(6+7)), and the products of the elements past the
 * multiple of eight (at most seven: lane a computes tail element a, and
 * every lane gets them by shuffle) are added one by one after them (dot8).
 * Every operation is a round-to-nearest intrinsic, so nvcc fuses no
 * multiply and add; the square root and the divisions are IEEE's.
 *
 * The backward's dw is a sum over the rows: one thread a column adds its
 * rows in row order, as the CPU loop does, so it too is the CPU engine's
 * bits; the columns are the only parallelism of that kernel.
 */
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

#define SDC_RMS_THREADS 256    /* 32 rows a block, eight lanes a row */
#define SDC_RMS_COL_THREADS 32 /* the dw kernel: a warp of columns a block */

/* y, rstd of rows rows of cols: RMSNorm's operations in its order. */
__global__ void __launch_bounds__(SDC_RMS_THREADS)
    sdc_rms_norm_kernel(float *__restrict__ y, float *__restrict__ rstd, const float *__restrict__ x,
                        const float *__restrict__ w, int64_t rows, int64_t cols, float eps) {
    const int lane = threadIdx.x & 7;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
    const bool ok = row < rows; /* the lanes of a row past the end still shuffle */
    const float *xr = x + (ok ? row : 0) * cols;
    const int64_t lead = cols & ~(int64_t)7;

    /* dot8(x, x): each square rounded before it is added */
    float a = 0.0f;
    if (ok)
        for (int64_t j = lane; j < lead; j += 8) a = __fadd_rn(a, __fmul_rn(xr[j], xr[j]));
    /* the tail (fewer than eight elements): lane a squares element lead+a */
    const int nt = ok ? (int)(cols - lead) : 0;
    float sq = 0.0f;
    if (lane < nt) sq = __fmul_rn(xr[lead + lane], xr[lead + lane]);
    float tails[8];
    sdc_lanes8(sq, tails);
    float s = sdc_sum8(a);
    for (int i = 0; i < nt; i++) s = __fadd_rn(s, tails[i]);
    /* rstd32: 1 / sqrt(v + eps), v = s / c, the square root correctly rounded */
    const float rs = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(s, (float)cols), eps)));
    if (!ok) return;

    float *yr = y + row * cols;
    for (int64_t j = lane; j < cols; j += 8) yr[j] = __fmul_rn(__fmul_rn(xr[j], rs), w[j]);
    if (lane == 0) rstd[row] = rs;
}

/*
 * dx of rows rows: RMSNormBackward's row sum of g*n (g = w*dy, n = x*r) in
 * dot8's order, m = sum / c, then gx = (g - n*m) * r, written or added.
 */
__global__ void __launch_bounds__(SDC_RMS_THREADS)
    sdc_rms_norm_dx_kernel(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ x,
                           const float *__restrict__ w, const float *__restrict__ rstd, int64_t rows,
                           int64_t cols, int add_dx) {
    const int lane = threadIdx.x & 7;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
    const bool ok = row < rows;
    const int64_t r = ok ? row : 0;
    const float *xr = x + r * cols, *dyr = dy + r * cols;
    const float rs = rstd[r];
    const int64_t lead = cols & ~(int64_t)7;

    float a = 0.0f;
    if (ok)
        for (int64_t j = lane; j < lead; j += 8)
            a = __fadd_rn(a, __fmul_rn(__fmul_rn(w[j], dyr[j]), __fmul_rn(xr[j], rs)));
    /* the tail's g*n, lane a computing element lead+a */
    const int nt = ok ? (int)(cols - lead) : 0;
    float tgn = 0.0f;
    if (lane < nt) tgn = __fmul_rn(__fmul_rn(w[lead + lane], dyr[lead + lane]), __fmul_rn(xr[lead + lane], rs));
    float tails[8];
    sdc_lanes8(tgn, tails);
    float s = sdc_sum8(a);
    for (int i = 0; i < nt; i++) s = __fadd_rn(s, tails[i]);
    if (!ok) return;

    const float m = __fdiv_rn(s, (float)cols);
    float *dxr = dx + row * cols;
    for (int64_t j = lane; j < cols; j += 8) {
        const float n = __fmul_rn(xr[j], rs);
        const float g = __fmul_rn(w[j], dyr[j]);
        const float gx = __fmul_rn(__fsub_rn(g, __fmul_rn(n, m)), rs);
        dxr[j] = add_dx ? __fadd_rn(dxr[j], gx) : gx;
    }
}

/* dw (cols) = the sum over the rows of n*dy (n = x*r), from 0, in row order. */
__global__ void __launch_bounds__(SDC_RMS_COL_THREADS)
    sdc_rms_norm_dw_kernel(float *__restrict__ dw, const float *__restrict__ dy, const float *__restrict__ x,
                           const float *__restrict__ rstd, int64_t rows, int64_t cols) {
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    float sw = 0.0f;
#pragma unroll 8
    for (int64_t r = 0; r < rows; r++) {
        const float n = __fmul_rn(x[r * cols + j], rstd[r]);
        sw = __fadd_rn(sw, __fmul_rn(n, dy[r * cols + j]));
    }
    dw[j] = sw;
}

static int64_t sdc_rms_blocks(int64_t rows) { return (rows + SDC_RMS_THREADS / 8 - 1) / (SDC_RMS_THREADS / 8); }

/* rows and cols that the kernels' grids and indices take. */
static bool sdc_rms_dims(int64_t rows, int64_t cols) {
    return rows > 0 && cols > 0 && sdc_rms_blocks(rows) <= 0x7fffffff && rows <= INT64_MAX / cols &&
           (cols + SDC_RMS_COL_THREADS - 1) / SDC_RMS_COL_THREADS <= 0x7fffffff;
}

extern "C" int sdc_rms_norm(const sdc_ctx *c, uint64_t y, uint64_t rstd, uint64_t x, uint64_t w, int64_t rows,
                            int64_t cols, float eps) {
    if (!c || !sdc_rms_dims(rows, cols) || !y || !rstd || !x || !w)
        return SD_FAIL(SD_ERR_ARG, "sdc_rms_norm: bad arguments (%lld rows of %lld)", (long long)rows,
                       (long long)cols);
    SD_TRY(sdc_use_device(c->device));
    sdc_rms_norm_kernel<<<(unsigned)sdc_rms_blocks(rows), SDC_RMS_THREADS, 0, (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)y, (float *)(uintptr_t)rstd, (const float *)(uintptr_t)x, (const float *)(uintptr_t)w,
        rows, cols, eps);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_rms_norm_backward(const sdc_ctx *c, uint64_t dx, uint64_t dw, uint64_t dy, uint64_t x, uint64_t w,
                                     uint64_t rstd, int64_t rows, int64_t cols, sdc_flag add_dx) {
    if (!c || !sdc_rms_dims(rows, cols) || !dx || !dw || !dy || !x || !w || !rstd)
        return SD_FAIL(SD_ERR_ARG, "sdc_rms_norm_backward: bad arguments (%lld rows of %lld)", (long long)rows,
                       (long long)cols);
    SD_TRY(sdc_use_device(c->device));
    const cudaStream_t st = (cudaStream_t)(uintptr_t)c->stream;
    sdc_rms_norm_dx_kernel<<<(unsigned)sdc_rms_blocks(rows), SDC_RMS_THREADS, 0, st>>>(
        (float *)(uintptr_t)dx, (const float *)(uintptr_t)dy, (const float *)(uintptr_t)x,
        (const float *)(uintptr_t)w, (const float *)(uintptr_t)rstd, rows, cols, add_dx ? 1 : 0);
    SD_CUDA(cudaGetLastError());
    const int64_t col_blocks = (cols + SDC_RMS_COL_THREADS - 1) / SDC_RMS_COL_THREADS;
    sdc_rms_norm_dw_kernel<<<(unsigned)col_blocks, SDC_RMS_COL_THREADS, 0, st>>>(
        (float *)(uintptr_t)dw, (const float *)(uintptr_t)dy, (const float *)(uintptr_t)x,
        (const float *)(uintptr_t)rstd, rows, cols);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
