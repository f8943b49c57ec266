/*
 * sd_compute_layernorm.cu: layer normalisation over float32 rows
 * (compute.Norms), forward and backward, with the CPU engine's bits.
 *
 * A row goes to eight lanes of a warp (sd_compute.cuh), which do
 * internal/hostloops' goLayerNorm and goLayerNormBackward in their
 * order: lane a sums the elements a, a+8, ... of the row's leading multiple
 * of eight, the eight partials are added as ((0+1)+(2+3))+((4+5)+(6+7)), and
 * the elements past the multiple of eight are added one by one after them
 * (sum8). The tail is at most seven elements: lane a reads tail element a
 * and every lane gets them by shuffle, so each lane reads only its own
 * elements. Every operation is a
 * round-to-nearest intrinsic, so nvcc fuses no multiply and add; the square
 * root and the divisions are IEEE's.
 *
 * The backward's dw and db are sums over the rows: one thread a column adds
 * its rows in row order, as the CPU loop does, so they too are the CPU
 * engine's bits; the columns are the only parallelism of that kernel.
 */
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

#define SDC_LN_THREADS 256   /* 32 rows a block, eight lanes a row */
#define SDC_LN_COL_THREADS 32 /* the dw/db kernel: a warp of columns a block */

/* y, mean, rstd of rows rows of cols: goLayerNorm's operations in its order. */
__global__ void __launch_bounds__(SDC_LN_THREADS)
    sdc_layer_norm_kernel(float *__restrict__ y, float *__restrict__ mean, float *__restrict__ rstd,
                          const float *__restrict__ x, const float *__restrict__ w, const float *__restrict__ b,
                          int64_t rows, int64_t cols, float eps) {
    const int lane = threadIdx.x & 7;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
    const bool ok = row < rows; /* the lanes of a row past the end still shuffle */
    const float *xr = x + (ok ? row : 0) * cols;
    const int64_t lead = cols & ~(int64_t)7;
    const float fc = (float)cols;

    /* m = sum8(x) / c */
    float a = 0.0f;
    if (ok)
        for (int64_t j = lane; j < lead; j += 8) a = __fadd_rn(a, xr[j]);
    /* the tail (fewer than eight elements): lane a reads element lead+a */
    const int nt = ok ? (int)(cols - lead) : 0;
    float tails[8];
    sdc_lanes8(lane < nt ? xr[lead + lane] : 0.0f, tails);
    float s = sdc_sum8(a);
    for (int i = 0; i < nt; i++) s = __fadd_rn(s, tails[i]);
    const float m = __fdiv_rn(s, fc);

    /* the variance: sum8 of (x - m)^2, each square rounded */
    a = 0.0f;
    if (ok)
        for (int64_t j = lane; j < lead; j += 8) {
            const float d = __fsub_rn(xr[j], m);
            a = __fadd_rn(a, __fmul_rn(d, d));
        }
    s = sdc_sum8(a);
    for (int i = 0; i < nt; i++) {
        const float d = __fsub_rn(tails[i], m);
        s = __fadd_rn(s, __fmul_rn(d, d));
    }
    /* rstd32: 1 / sqrt(v + eps), the square root correctly rounded */
    const float rs = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(s, fc), eps)));
    if (!ok) return;

    float *yr = y + row * cols;
    for (int64_t j = lane; j < cols; j += 8) {
        const float n = __fmul_rn(__fsub_rn(xr[j], m), rs);
        yr[j] = __fadd_rn(__fmul_rn(n, w[j]), b[j]);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = rs;
    }
}

/*
 * dx of rows rows: goLayerNormBackward's two row sums (of g = w*dy and of
 * g*n) in sum8's order, then gx = ((g - mean g) - n * mean gn) * r, written
 * or added.
 */
__global__ void __launch_bounds__(SDC_LN_THREADS)
    sdc_layer_norm_dx_kernel(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ x,
                             const float *__restrict__ w, const float *__restrict__ mean,
                             const float *__restrict__ rstd, int64_t rows, int64_t cols, int add_dx) {
    const int lane = threadIdx.x & 7;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
    const bool ok = row < rows;
    const int64_t r = ok ? row : 0;
    const float *xr = x + r * cols, *dyr = dy + r * cols;
    const float m = mean[r], rs = rstd[r];
    const int64_t lead = cols & ~(int64_t)7;
    const float fc = (float)cols;

    float sa = 0.0f, sb = 0.0f;
    if (ok)
        for (int64_t j = lane; j < lead; j += 8) {
            const float g = __fmul_rn(w[j], dyr[j]);
            sa = __fadd_rn(sa, g);
            sb = __fadd_rn(sb, __fmul_rn(g, __fmul_rn(__fsub_rn(xr[j], m), rs)));
        }
    /* the tail's g and g*n, lane a computing element lead+a */
    const int nt = ok ? (int)(cols - lead) : 0;
    float tg = 0.0f, tgn = 0.0f;
    if (lane < nt) {
        tg = __fmul_rn(w[lead + lane], dyr[lead + lane]);
        tgn = __fmul_rn(tg, __fmul_rn(__fsub_rn(xr[lead + lane], m), rs));
    }
    float tgs[8], tgns[8];
    sdc_lanes8(tg, tgs);
    sdc_lanes8(tgn, tgns);
    float sg = sdc_sum8(sa), sgn = sdc_sum8(sb);
    for (int i = 0; i < nt; i++) {
        sg = __fadd_rn(sg, tgs[i]);
        sgn = __fadd_rn(sgn, tgns[i]);
    }
    if (!ok) return;
    const float mg = __fdiv_rn(sg, fc), mgn = __fdiv_rn(sgn, fc);
    float *dxr = dx + row * cols;
    for (int64_t j = lane; j < cols; j += 8) {
        const float n = __fmul_rn(__fsub_rn(xr[j], m), rs);
        const float g = __fmul_rn(w[j], dyr[j]);
        const float gx = __fmul_rn(__fsub_rn(__fsub_rn(g, mg), __fmul_rn(n, mgn)), rs);
        dxr[j] = add_dx ? __fadd_rn(dxr[j], gx) : gx;
    }
}

/* dw, db (cols) = sums over the rows of dy*n and dy, from 0, in row order. */
__global__ void __launch_bounds__(SDC_LN_COL_THREADS)
    sdc_layer_norm_dwdb_kernel(float *__restrict__ dw, float *__restrict__ db, const float *__restrict__ dy,
                               const float *__restrict__ x, const float *__restrict__ mean,
                               const float *__restrict__ rstd, int64_t rows, int64_t cols) {
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    float sw = 0.0f, sb = 0.0f;
#pragma unroll 8
    for (int64_t r = 0; r < rows; r++) {
        const float d = dy[r * cols + j];
        const float n = __fmul_rn(__fsub_rn(x[r * cols + j], mean[r]), rstd[r]);
        sb = __fadd_rn(sb, d);
        sw = __fadd_rn(sw, __fmul_rn(n, d));
    }
    dw[j] = sw;
    db[j] = sb;
}

static int64_t sdc_ln_blocks(int64_t rows) { return (rows + SDC_LN_THREADS / 8 - 1) / (SDC_LN_THREADS / 8); }

/* rows and cols that the kernels' grids and indices take. */
static bool sdc_ln_dims(int64_t rows, int64_t cols) {
    return rows > 0 && cols > 0 && sdc_ln_blocks(rows) <= 0x7fffffff && rows <= INT64_MAX / cols &&
           (cols + SDC_LN_COL_THREADS - 1) / SDC_LN_COL_THREADS <= 0x7fffffff;
}

extern "C" int sdc_layer_norm(const sdc_ctx *c, uint64_t y, uint64_t mean, uint64_t rstd, uint64_t x, uint64_t w,
                              uint64_t b, int64_t rows, int64_t cols, float eps) {
    if (!c || !sdc_ln_dims(rows, cols) || !y || !mean || !rstd || !x || !w || !b)
        return SD_FAIL(SD_ERR_ARG, "sdc_layer_norm: bad arguments (%lld rows of %lld)", (long long)rows,
                       (long long)cols);
    SD_TRY(sdc_use_device(c->device));
    sdc_layer_norm_kernel<<<(unsigned)sdc_ln_blocks(rows), SDC_LN_THREADS, 0, (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)y, (float *)(uintptr_t)mean, (float *)(uintptr_t)rstd, (const float *)(uintptr_t)x,
        (const float *)(uintptr_t)w, (const float *)(uintptr_t)b, rows, cols, eps);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_layer_norm_backward(const sdc_ctx *c, uint64_t dx, uint64_t dw, uint64_t db, uint64_t dy,
                                       uint64_t x, uint64_t w, uint64_t mean, uint64_t rstd, int64_t rows,
                                       int64_t cols, sdc_flag add_dx) {
    if (!c || !sdc_ln_dims(rows, cols) || !dx || !dw || !db || !dy || !x || !w || !mean || !rstd)
        return SD_FAIL(SD_ERR_ARG, "sdc_layer_norm_backward: bad arguments (%lld rows of %lld)", (long long)rows,
                       (long long)cols);
    SD_TRY(sdc_use_device(c->device));
    const cudaStream_t st = (cudaStream_t)(uintptr_t)c->stream;
    sdc_layer_norm_dx_kernel<<<(unsigned)sdc_ln_blocks(rows), SDC_LN_THREADS, 0, st>>>(
        (float *)(uintptr_t)dx, (const float *)(uintptr_t)dy, (const float *)(uintptr_t)x,
        (const float *)(uintptr_t)w, (const float *)(uintptr_t)mean, (const float *)(uintptr_t)rstd, rows, cols,
        add_dx ? 1 : 0);
    SD_CUDA(cudaGetLastError());
    const int64_t col_blocks = (cols + SDC_LN_COL_THREADS - 1) / SDC_LN_COL_THREADS;
    sdc_layer_norm_dwdb_kernel<<<(unsigned)col_blocks, SDC_LN_COL_THREADS, 0, st>>>(
        (float *)(uintptr_t)dw, (float *)(uintptr_t)db, (const float *)(uintptr_t)dy, (const float *)(uintptr_t)x,
        (const float *)(uintptr_t)mean, (const float *)(uintptr_t)rstd, rows, cols);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
