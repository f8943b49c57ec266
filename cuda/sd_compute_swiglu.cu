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
 * compute/cuda/cudatest emulates).
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

/* y (n) = silu(a (n)) * b (n). */
template <typename T>
__global__ void sdc_swiglu_kernel(T *__restrict__ y, const T *__restrict__ a, const T *__restrict__ b, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = sdc_ld(a + i);
        float e;
        const float s = sdc_swiglu_sigmoid(v, &e);
        sdc_st(y + i, __fmul_rn(__fmul_rn(v, s), sdc_ld(b + i)));
    }
}

/* da (n) = dy * b * silu'(a), db (n) = dy * silu(a); da may be dy (each element reads dy before writing da). */
template <typename T>
__global__ void sdc_swiglu_backward_kernel(T *da, T *__restrict__ db, const T *dy, const T *__restrict__ a,
                                           const T *__restrict__ b, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = sdc_ld(a + i);
        const float d = sdc_ld(dy + i);
        float e;
        const float s = sdc_swiglu_sigmoid(v, &e);
        sdc_st(db + i, __fmul_rn(__fmul_rn(v, s), d));
        float q = __fmul_rn(e, s);
        q = __fmul_rn(q, s);
        q = __fmul_rn(q, v);
        sdc_st(da + i, __fmul_rn(__fmul_rn(d, sdc_ld(b + i)), __fadd_rn(s, q)));
    }
}

static unsigned sdc_swiglu_blocks(int64_t n, int sm_count) {
    return (unsigned)sdc_grid(n, SDC_SWIGLU_THREADS, sm_count, 16);
}

template <typename T>
static int sdc_swiglu_run(const sdc_ctx *c, uint64_t y, uint64_t a, uint64_t b, int64_t n) {
    sdc_swiglu_kernel<T><<<sdc_swiglu_blocks(n, c->sm_count), SDC_SWIGLU_THREADS, 0,
                           (cudaStream_t)(uintptr_t)c->stream>>>((T *)(uintptr_t)y, (const T *)(uintptr_t)a,
                                                                 (const T *)(uintptr_t)b, n);
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
    sdc_swiglu_backward_kernel<T><<<sdc_swiglu_blocks(n, c->sm_count), SDC_SWIGLU_THREADS, 0,
                                    (cudaStream_t)(uintptr_t)c->stream>>>(
        (T *)(uintptr_t)da, (T *)(uintptr_t)db, (const T *)(uintptr_t)dy, (const T *)(uintptr_t)a,
        (const T *)(uintptr_t)b, n);
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
