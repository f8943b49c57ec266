/*
 * sd_compute_swiglu.cu: SwiGLU's elementwise part, y = silu(a) * b, forward
 * and backward (compute.SwiGLUs; the three projections around it are
 * GEMMs), over float32 or bf16: templates over the element type T (float,
 * or sdc_bf16 read exactly and stored rounded: sd_compute.cuh), one
 * launcher per direction taking the dtype.
 *
 * Each element does the float32 operations of internal/hostloops' SwiGLU
 * and SwiGLUBackward in their order, with their e^x (sdc_exp32 of
 * sd_compute.cuh, not expf), the division IEEE's, and with round-to-nearest
 * intrinsics so that nvcc fuses no multiply and add into an FMA: in fp32 the
 * GPU gives the CPU engine's bits; in bf16 the same float32 operations on
 * the widened inputs, each result rounded to bf16 once, on its store (what
 * compute/cuda/cudatest emulates). a and b are the two halves of each row
 * of one packed tensor ab (rows, 2f), [a | b], as the joined gate_proj and
 * up_proj GEMM writes it, and the backward writes [da | db] likewise. Where
 * every pointer is 16-byte aligned and f a whole number of 16-byte words, a
 * thread moves 16 bytes of each tensor at a time (sdc_vec16: 8 bf16 or 4
 * floats, each element the same operations), else one element.
 *
 *   e = exp(-a), s = 1 / (1 + e)     (sigma(a))
 *   y  = (a * s) * b
 *   da = (dy * b) * (s + ((e * s) * s) * a)    (silu'(a) = s + a s (1 - s), 1 - s = e s)
 *   db = (a * s) * dy
 */
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

#define SDC_SWIGLU_THREADS 256

/* s = 1 / (1 + e), e = exp32(-v); *e_out = e. */
static __device__ __forceinline__ float sdc_swiglu_sigmoid(float v, float *e_out) {
    const float e = sdc_exp32(-v);
    *e_out = e;
    return __fdiv_rn(1.0f, __fadd_rn(1.0f, e));
}

/* One element of y = silu(a) * b. */
template <typename T>
static __device__ __forceinline__ void sdc_swiglu_one(T *y, const T *a, const T *b) {
    const float v = sdc_ld(a);
    float e;
    const float s = sdc_swiglu_sigmoid(v, &e);
    sdc_st(y, __fmul_rn(__fmul_rn(v, s), sdc_ld(b)));
}

/* One element of the backward. */
template <typename T>
static __device__ __forceinline__ void sdc_swiglu_backward_one(T *da, T *db, const T *dy, const T *a, const T *b) {
    const float v = sdc_ld(a);
    const float d = sdc_ld(dy);
    float e;
    const float s = sdc_swiglu_sigmoid(v, &e);
    sdc_st(db, __fmul_rn(__fmul_rn(v, s), d));
    float q = __fmul_rn(e, s);
    q = __fmul_rn(q, s);
    q = __fmul_rn(q, v);
    sdc_st(da, __fmul_rn(__fmul_rn(d, sdc_ld(b)), __fadd_rn(s, q)));
}

/* Row r of y (rows, f) from row r of ab (rows, 2f), [a | b]; vec: every
 * pointer 16-byte aligned and f a whole number of 16-byte words, each
 * thread then moving one word of y, a and b at a time. Items (elements, or
 * words when vec) are counted over y, row by row: item i is row i / w,
 * column i % w, w the items of a row. */
template <typename T>
__global__ void sdc_swiglu_kernel(T *__restrict__ y, const T *__restrict__ ab, int64_t rows, int64_t f, bool vec) {
    constexpr int V = 16 / sizeof(T);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x, first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (vec) {
        const int64_t w = f / V, n = rows * w;
        for (int64_t i = first; i < n; i += stride) {
            const int64_t r = i / w, j = i - r * w;
            const uint4 *row = (const uint4 *)(ab + r * 2 * f);
            sdc_vec16<T> av, bv, yv;
            av.u = row[j];
            bv.u = row[w + j];
#pragma unroll
            for (int k = 0; k < V; k++) sdc_swiglu_one(&yv.e[k], &av.e[k], &bv.e[k]);
            ((uint4 *)y)[i] = yv.u;
        }
        return;
    }
    const int64_t n = rows * f;
    for (int64_t i = first; i < n; i += stride) {
        const int64_t r = i / f, j = i - r * f;
        const T *a = ab + r * 2 * f + j;
        sdc_swiglu_one(y + i, a, a + f);
    }
}

/* Row r of dab (rows, 2f), [da | db], from row r of dy (rows, f) and of ab;
 * vec and the items as above. */
template <typename T>
__global__ void sdc_swiglu_backward_kernel(T *__restrict__ dab, const T *__restrict__ dy, const T *__restrict__ ab,
                                           int64_t rows, int64_t f, bool vec) {
    constexpr int V = 16 / sizeof(T);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x, first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (vec) {
        const int64_t w = f / V, n = rows * w;
        for (int64_t i = first; i < n; i += stride) {
            const int64_t r = i / w, j = i - r * w;
            const uint4 *row = (const uint4 *)(ab + r * 2 * f);
            uint4 *drow = (uint4 *)(dab + r * 2 * f);
            sdc_vec16<T> av, bv, dv, dav, dbv;
            av.u = row[j];
            bv.u = row[w + j];
            dv.u = ((const uint4 *)dy)[i];
#pragma unroll
            for (int k = 0; k < V; k++) sdc_swiglu_backward_one(&dav.e[k], &dbv.e[k], &dv.e[k], &av.e[k], &bv.e[k]);
            drow[j] = dav.u;
            drow[w + j] = dbv.u;
        }
        return;
    }
    const int64_t n = rows * f;
    for (int64_t i = first; i < n; i += stride) {
        const int64_t r = i / f, j = i - r * f, o = r * 2 * f + j;
        sdc_swiglu_backward_one(dab + o, dab + o + f, dy + i, ab + o, ab + o + f);
    }
}

/* The grid for rows x f elements, counted in 16-byte words when vec. */
template <typename T>
static unsigned sdc_swiglu_blocks(int64_t rows, int64_t f, bool vec, int sm_count) {
    const int64_t items = vec ? rows * (f / (int64_t)(16 / sizeof(T))) : rows * f;
    return (unsigned)sdc_grid(items, SDC_SWIGLU_THREADS, sm_count, 16);
}

/* Whether rows of f elements of T can move in 16-byte words: p... 16-byte
 * aligned and f a whole number of words. */
template <typename T>
static bool sdc_swiglu_vec(int64_t f, uint64_t p0, uint64_t p1, uint64_t p2) {
    return f % (int64_t)(16 / sizeof(T)) == 0 && sdc_aligned16(p0) && sdc_aligned16(p1) && sdc_aligned16(p2);
}

template <typename T>
static int sdc_swiglu_run(const sdc_ctx *c, uint64_t y, uint64_t ab, int64_t rows, int64_t f) {
    const bool vec = sdc_swiglu_vec<T>(f, y, ab, ab);
    sdc_swiglu_kernel<T><<<sdc_swiglu_blocks<T>(rows, f, vec, c->sm_count), SDC_SWIGLU_THREADS, 0,
                           (cudaStream_t)(uintptr_t)c->stream>>>((T *)(uintptr_t)y, (const T *)(uintptr_t)ab, rows,
                                                                 f, vec);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_swiglu(const sdc_ctx *c, sdc_dtype dtype, uint64_t y, uint64_t ab, int64_t rows, int64_t f) {
    if (!c || (dtype != SDC_F32 && dtype != SDC_BF16) || rows < 0 || f < 0 || (rows > 0 && f > 0 && (!y || !ab)))
        return SD_FAIL(SD_ERR_ARG, "sdc_swiglu: bad arguments");
    if (rows == 0 || f == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    if (dtype == SDC_BF16) return sdc_swiglu_run<sdc_bf16>(c, y, ab, rows, f);
    return sdc_swiglu_run<float>(c, y, ab, rows, f);
}

template <typename T>
static int sdc_swiglu_backward_run(const sdc_ctx *c, uint64_t dab, uint64_t dy, uint64_t ab, int64_t rows, int64_t f) {
    const bool vec = sdc_swiglu_vec<T>(f, dab, dy, ab);
    sdc_swiglu_backward_kernel<T><<<sdc_swiglu_blocks<T>(rows, f, vec, c->sm_count), SDC_SWIGLU_THREADS, 0,
                                    (cudaStream_t)(uintptr_t)c->stream>>>(
        (T *)(uintptr_t)dab, (const T *)(uintptr_t)dy, (const T *)(uintptr_t)ab, rows, f, vec);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_swiglu_backward(const sdc_ctx *c, sdc_dtype dtype, uint64_t dab, uint64_t dy, uint64_t ab,
                                   int64_t rows, int64_t f) {
    if (!c || (dtype != SDC_F32 && dtype != SDC_BF16) || rows < 0 || f < 0 ||
        (rows > 0 && f > 0 && (!dab || !dy || !ab)))
        return SD_FAIL(SD_ERR_ARG, "sdc_swiglu_backward: bad arguments");
    if (rows == 0 || f == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    if (dtype == SDC_BF16) return sdc_swiglu_backward_run<sdc_bf16>(c, dab, dy, ab, rows, f);
    return sdc_swiglu_backward_run<float>(c, dab, dy, ab, rows, f);
}
