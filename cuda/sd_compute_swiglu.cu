/*
 * sd_compute_swiglu.cu: SwiGLU's elementwise part over float32,
 * y = silu(a) * b, forward and backward (compute.SwiGLUs; the three
 * projections around it are GEMMs).
 *
 * Each element does the float32 operations of internal/hostloops' SwiGLU
 * and SwiGLUBackward in their order, with their e^x (sdc_exp32 of
 * sd_compute.cuh, not expf), the division IEEE's, and with round-to-nearest
 * intrinsics so that nvcc fuses no multiply and add into an FMA: the GPU
 * gives the CPU engine's bits.
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
__global__ void sdc_swiglu_kernel(float *__restrict__ y, const float *__restrict__ a, const float *__restrict__ b,
                                  int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = a[i];
        float e;
        const float s = sdc_swiglu_sigmoid(v, &e);
        y[i] = __fmul_rn(__fmul_rn(v, s), b[i]);
    }
}

/* da (n) = dy * b * silu'(a), db (n) = dy * silu(a); da may be dy (each element reads dy before writing da). */
__global__ void sdc_swiglu_backward_kernel(float *da, float *__restrict__ db, const float *dy,
                                           const float *__restrict__ a, const float *__restrict__ b, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = a[i];
        const float d = dy[i];
        float e;
        const float s = sdc_swiglu_sigmoid(v, &e);
        db[i] = __fmul_rn(__fmul_rn(v, s), d);
        float q = __fmul_rn(e, s);
        q = __fmul_rn(q, s);
        q = __fmul_rn(q, v);
        da[i] = __fmul_rn(__fmul_rn(d, b[i]), __fadd_rn(s, q));
    }
}

static unsigned sdc_swiglu_blocks(int64_t n, int sm_count) {
    return (unsigned)sdc_grid(n, SDC_SWIGLU_THREADS, sm_count, 16);
}

extern "C" int sdc_swiglu(const sdc_ctx *c, uint64_t y, uint64_t a, uint64_t b, int64_t n) {
    if (!c || n < 0 || (n > 0 && (!y || !a || !b))) return SD_FAIL(SD_ERR_ARG, "sdc_swiglu: bad arguments");
    if (n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    sdc_swiglu_kernel<<<sdc_swiglu_blocks(n, c->sm_count), SDC_SWIGLU_THREADS, 0,
                        (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)y, (const float *)(uintptr_t)a, (const float *)(uintptr_t)b, n);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_swiglu_backward(const sdc_ctx *c, uint64_t da, uint64_t db, uint64_t dy, uint64_t a, uint64_t b,
                                   int64_t n) {
    if (!c || n < 0 || (n > 0 && (!da || !db || !dy || !a || !b)))
        return SD_FAIL(SD_ERR_ARG, "sdc_swiglu_backward: bad arguments");
    if (n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    sdc_swiglu_backward_kernel<<<sdc_swiglu_blocks(n, c->sm_count), SDC_SWIGLU_THREADS, 0,
                                 (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)da, (float *)(uintptr_t)db, (const float *)(uintptr_t)dy, (const float *)(uintptr_t)a,
        (const float *)(uintptr_t)b, n);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
