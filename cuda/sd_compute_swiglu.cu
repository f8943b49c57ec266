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
 * compute/cuda/cudatest emulates). Where every pointer is 16-byte aligned a
 * thread moves 16 bytes of each tensor at a time (sdc_vec16: 8 bf16 or 4
 * floats, each element the same operations), the last partial word's
 * elements one by one.
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

/* One element of the backward; da may be dy (dy is read first). */
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

/* y (n) = silu(a (n)) * b (n); vec: every pointer 16-byte aligned, the
 * elements up to the last whole 16 bytes moved in 16-byte words. */
template <typename T>
__global__ void sdc_swiglu_kernel(T *__restrict__ y, const T *__restrict__ a, const T *__restrict__ b, int64_t n,
                                  bool vec) {
    constexpr int V = 16 / sizeof(T);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x, first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t nv = vec ? n / V : 0;
    for (int64_t i = first; i < nv; i += stride) {
        sdc_vec16<T> av, bv, yv;
        av.u = ((const uint4 *)a)[i];
        bv.u = ((const uint4 *)b)[i];
#pragma unroll
        for (int j = 0; j < V; j++) sdc_swiglu_one(&yv.e[j], &av.e[j], &bv.e[j]);
        ((uint4 *)y)[i] = yv.u;
    }
    for (int64_t i = nv * V + first; i < n; i += stride) sdc_swiglu_one(y + i, a + i, b + i);
}

/* da (n) = dy * b * silu'(a), db (n) = dy * silu(a); da may be dy (each
 * element, or 16-byte word, reads dy before writing da). vec as above. */
template <typename T>
__global__ void sdc_swiglu_backward_kernel(T *da, T *__restrict__ db, const T *dy, const T *__restrict__ a,
                                           const T *__restrict__ b, int64_t n, bool vec) {
    constexpr int V = 16 / sizeof(T);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x, first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t nv = vec ? n / V : 0;
    for (int64_t i = first; i < nv; i += stride) {
        sdc_vec16<T> av, bv, dv, dav, dbv;
        av.u = ((const uint4 *)a)[i];
        bv.u = ((const uint4 *)b)[i];
        dv.u = ((const uint4 *)dy)[i];
#pragma unroll
        for (int j = 0; j < V; j++) sdc_swiglu_backward_one(&dav.e[j], &dbv.e[j], &dv.e[j], &av.e[j], &bv.e[j]);
        ((uint4 *)db)[i] = dbv.u;
        ((uint4 *)da)[i] = dav.u;
    }
    for (int64_t i = nv * V + first; i < n; i += stride)
        sdc_swiglu_backward_one(da + i, db + i, dy + i, a + i, b + i);
}

/* The grid for n elements, counted in 16-byte words when vec. */
template <typename T>
static unsigned sdc_swiglu_blocks(int64_t n, bool vec, int sm_count) {
    const int64_t items = vec ? (n + (int64_t)(16 / sizeof(T)) - 1) / (int64_t)(16 / sizeof(T)) : n;
    return (unsigned)sdc_grid(items, SDC_SWIGLU_THREADS, sm_count, 16);
}

template <typename T>
static int sdc_swiglu_run(const sdc_ctx *c, uint64_t y, uint64_t a, uint64_t b, int64_t n) {
    const bool vec = sdc_aligned16(y) && sdc_aligned16(a) && sdc_aligned16(b);
    sdc_swiglu_kernel<T><<<sdc_swiglu_blocks<T>(n, vec, c->sm_count), SDC_SWIGLU_THREADS, 0,
                           (cudaStream_t)(uintptr_t)c->stream>>>((T *)(uintptr_t)y, (const T *)(uintptr_t)a,
                                                                 (const T *)(uintptr_t)b, n, vec);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_swiglu(const sdc_ctx *c, sdc_dtype dtype, uint64_t y, uint64_t a, uint64_t b, int64_t n) {
    if (!c || (dtype != SDC_F32 && dtype != SDC_BF16) || n < 0 || (n > 0 && (!y || !a || !b)))
        return SD_FAIL(SD_ERR_ARG, "sdc_swiglu: bad arguments");
    if (n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    if (dtype == SDC_BF16) return sdc_swiglu_run<sdc_bf16>(c, y, a, b, n);
    return sdc_swiglu_run<float>(c, y, a, b, n);
}

template <typename T>
static int sdc_swiglu_backward_run(const sdc_ctx *c, uint64_t da, uint64_t db, uint64_t dy, uint64_t a, uint64_t b,
                                   int64_t n) {
    const bool vec = sdc_aligned16(da) && sdc_aligned16(db) && sdc_aligned16(dy) && sdc_aligned16(a) &&
                     sdc_aligned16(b);
    sdc_swiglu_backward_kernel<T><<<sdc_swiglu_blocks<T>(n, vec, c->sm_count), SDC_SWIGLU_THREADS, 0,
                                    (cudaStream_t)(uintptr_t)c->stream>>>(
        (T *)(uintptr_t)da, (T *)(uintptr_t)db, (const T *)(uintptr_t)dy, (const T *)(uintptr_t)a,
        (const T *)(uintptr_t)b, n, vec);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_swiglu_backward(const sdc_ctx *c, sdc_dtype dtype, uint64_t da, uint64_t db, uint64_t dy,
                                   uint64_t a, uint64_t b, int64_t n) {
    if (!c || (dtype != SDC_F32 && dtype != SDC_BF16) || n < 0 || (n > 0 && (!da || !db || !dy || !a || !b)))
        return SD_FAIL(SD_ERR_ARG, "sdc_swiglu_backward: bad arguments");
    if (n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    if (dtype == SDC_BF16) return sdc_swiglu_backward_run<sdc_bf16>(c, da, db, dy, a, b, n);
    return sdc_swiglu_backward_run<float>(c, da, db, dy, a, b, n);
}
