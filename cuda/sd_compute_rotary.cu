/*
 * sd_compute_rotary.cu: rotary position embedding (RoPE) of rows of heads,
 * forward and its inverse (compute.Rotary's plan in compute/cuda uploads the
 * cos and sin table once, in fp32, and runs this for every rotation), over
 * float32 or bf16 rows: a template over the element type T (float, or
 * sdc_bf16 read exactly and stored rounded: sd_compute.cuh), one launcher
 * taking the dtype.
 *
 * x is rows of width channels ld elements apart (ld >= width: the queries'
 * and keys' heads at the front of a packed row of queries, keys and values),
 * heads of hs channels side by side, row r at position p = r mod t; the
 * columns of a row past width are not touched. A thread turns one pair: channel i < hs/2 of a head
 * with channel i + hs/2, by the angle whose cosine and sine are the table's
 * (p, i) entries, as internal/hostloops' Rotate does:
 *
 *   y[i]        = x[i] * cos - x[i + hs/2] * sin
 *   y[i + hs/2] = x[i + hs/2] * cos + x[i] * sin
 *
 * with sin negated for the inverse rotation (the gradient). Each product is
 * rounded before the sum (round-to-nearest intrinsics, no FMA): in fp32 the
 * CPU engine's bits; in bf16 the same float32 operations on the widened
 * elements, each result rounded to bf16 once, on its store (what
 * compute/cuda/cudatest emulates). A thread reads its two elements before it
 * writes them and no other thread touches them, so y may be x. Where half
 * is a multiple of 8 bf16 or 4 floats and the pointers are 16-byte aligned
 * and ld keeps every row so (Llama's heads of 64), a thread turns that many
 * pairs in 16-byte loads
 * and stores in each head of its row, reading the table once
 * (sdc_rotate_vec_kernel), the same operations on each.
 */
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

#define SDC_ROTATE_THREADS 256

/* y (rows, width; rows ld apart) = x rotated; half = hs/2, the tables (t, half). y may be x. */
template <typename T>
__global__ void sdc_rotate_kernel(T *y, const T *x, const float *__restrict__ cos_tab,
                                  const float *__restrict__ sin_tab, int64_t rows, int64_t width, int64_t ld,
                                  int64_t half, int64_t t, int inverse) {
    const int64_t per_row = width / 2; /* pairs in a row */
    const int64_t n = rows * per_row;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride) {
        const int64_t row = k / per_row, pr = k - row * per_row;
        const int64_t head = pr / half, i = pr - head * half;
        const int64_t e = (row % t) * half + i;
        const float ci = cos_tab[e];
        const float si = inverse ? -sin_tab[e] : sin_tab[e];
        const int64_t o = row * ld + head * 2 * half + i;
        const float a = sdc_ld(x + o), b = sdc_ld(x + o + half);
        sdc_st(y + o, __fsub_rn(__fmul_rn(a, ci), __fmul_rn(b, si)));
        sdc_st(y + o + half, __fadd_rn(__fmul_rn(b, ci), __fmul_rn(a, si)));
    }
}

/* The same rotation, where half is a multiple of V = 16/sizeof(T) and x, y
 * and the tables are 16-byte aligned: a thread turns V pairs at (row, i) in
 * every head of the row, reading their V cosines and sines once (the table
 * does not depend on the head; read again for each head, it moved twice the
 * bytes of x through the caches), with the same operations on each pair. */
template <typename T>
__global__ void sdc_rotate_vec_kernel(T *y, const T *x, const float *__restrict__ cos_tab,
                                      const float *__restrict__ sin_tab, int64_t rows, int64_t width, int64_t ld,
                                      int64_t half, int64_t t, int inverse) {
    constexpr int V = 16 / sizeof(T);
    const int64_t groups = half / V; /* V-pair groups in a head */
    const int64_t heads = width / (2 * half);
    const int64_t n = rows * groups;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride) {
        const int64_t row = k / groups, i = (k - row * groups) * V;
        const int64_t e = (row % t) * half + i;
        float cs[V], sn[V];
#pragma unroll
        for (int j = 0; j < V; j += 4) {
            const float4 c4 = *(const float4 *)(cos_tab + e + j), s4 = *(const float4 *)(sin_tab + e + j);
            cs[j] = c4.x, cs[j + 1] = c4.y, cs[j + 2] = c4.z, cs[j + 3] = c4.w;
            sn[j] = s4.x, sn[j + 1] = s4.y, sn[j + 2] = s4.z, sn[j + 3] = s4.w;
        }
#pragma unroll
        for (int j = 0; j < V; j++) sn[j] = inverse ? -sn[j] : sn[j];
#pragma unroll 4
        for (int64_t h = 0; h < heads; h++) {
            const int64_t o = row * ld + h * 2 * half + i;
            sdc_vec16<T> xa, xb, ya, yb;
            xa.u = *(const uint4 *)(x + o);
            xb.u = *(const uint4 *)(x + o + half);
#pragma unroll
            for (int j = 0; j < V; j++) {
                const float a = sdc_ld(&xa.e[j]), b = sdc_ld(&xb.e[j]);
                sdc_st(&ya.e[j], __fsub_rn(__fmul_rn(a, cs[j]), __fmul_rn(b, sn[j])));
                sdc_st(&yb.e[j], __fadd_rn(__fmul_rn(b, cs[j]), __fmul_rn(a, sn[j])));
            }
            *(uint4 *)(y + o) = ya.u;
            *(uint4 *)(y + o + half) = yb.u;
        }
    }
}

template <typename T>
static int sdc_rotate_run(const sdc_ctx *c, uint64_t y, uint64_t x, uint64_t cos_tab, uint64_t sin_tab, int64_t rows,
                          int64_t width, int64_t ld, int64_t hs, int64_t t, int inverse) {
    constexpr int V = 16 / sizeof(T);
    cudaStream_t s = (cudaStream_t)(uintptr_t)c->stream;
    T *yp = (T *)(uintptr_t)y;
    const T *xp = (const T *)(uintptr_t)x;
    const float *ct = (const float *)(uintptr_t)cos_tab, *st = (const float *)(uintptr_t)sin_tab;
    if ((hs / 2) % V == 0 && ld % V == 0 && sdc_aligned16(y) && sdc_aligned16(x) && sdc_aligned16(cos_tab) && sdc_aligned16(sin_tab)) {
        const unsigned blocks = (unsigned)sdc_grid(rows * (hs / 2 / V), SDC_ROTATE_THREADS, c->sm_count, 16);
        sdc_rotate_vec_kernel<T><<<blocks, SDC_ROTATE_THREADS, 0, s>>>(yp, xp, ct, st, rows, width, ld, hs / 2, t,
                                                                            inverse);
    } else {
        const unsigned blocks = (unsigned)sdc_grid(rows * (width / 2), SDC_ROTATE_THREADS, c->sm_count, 16);
        sdc_rotate_kernel<T><<<blocks, SDC_ROTATE_THREADS, 0, s>>>(yp, xp, ct, st, rows, width, ld, hs / 2, t, inverse);
    }
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_rotate(const sdc_ctx *c, sdc_dtype dtype, uint64_t y, uint64_t x, uint64_t cos_tab,
                          uint64_t sin_tab, int64_t rows, int64_t width, int64_t ld, int64_t hs, int64_t t,
                          sdc_flag inverse) {
    if (!c || (dtype != SDC_F32 && dtype != SDC_BF16) || rows <= 0 || width <= 0 || ld < width || hs <= 0 ||
        hs % 2 != 0 || width % hs != 0 || t <= 0 || rows > INT64_MAX / ld || t > INT64_MAX / hs || !y || !x ||
        !cos_tab || !sin_tab)
        return SD_FAIL(SD_ERR_ARG,
                       "sdc_rotate: bad arguments (dtype %d, %lld rows of %lld, %lld apart, heads of %lld, %lld positions)",
                       (int)dtype, (long long)rows, (long long)width, (long long)ld, (long long)hs, (long long)t);
    SD_TRY(sdc_use_device(c->device));
    if (dtype == SDC_BF16) return sdc_rotate_run<sdc_bf16>(c, y, x, cos_tab, sin_tab, rows, width, ld, hs, t, inverse ? 1 : 0);
    return sdc_rotate_run<float>(c, y, x, cos_tab, sin_tab, rows, width, ld, hs, t, inverse ? 1 : 0);
}
