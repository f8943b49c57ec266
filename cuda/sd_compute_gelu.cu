/*
 * sd_compute_gelu.cu: GELU in GPT-2's tanh approximation over float32,
 * forward and backward, element by element (compute.GELUs).
 *
 * Each element does the float32 operations of internal/hostloops'
 * goGELU and goGELUBackward in their order, with their e^x (sdc_exp32 of
 * sd_compute.cuh, not expf),
 * and with round-to-nearest intrinsics so that nvcc fuses no multiply and
 * add into an FMA: the GPU gives the CPU engine's bits.
 *
 *   gelu(x)  = x * s,              s = 1 / (1 + e), e = exp(-2k(x + c x^3))
 *   gelu'(x) = s + 2k * (s e s) x (1 + 3c x^2),     k = sqrt(2/pi), c = 0.044715
 *
 * The bf16 kernels (the bf16 Linear's GELU) do other arithmetic, tanhf's, in
 * float from the bf16 inputs, eight elements per 16-byte load:
 *   gelu(x)  = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
 *   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 * Thread i < n/8 handles the vector i; the last n % 8 elements one thread each.
 * One launcher per direction picks the kernel by dtype.
 */
#include "sd_bf16.cuh"
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

#define SDC_GELU_THREADS 256

/* hostloops' constants, rounded to float32 as Go's untyped constants are. */
#define SDC_GELU_C ((float)0.044715)
#define SDC_GELU_M2K ((float)(-2 * 0.7978845608028654))
#define SDC_GELU_2K ((float)(2 * 0.7978845608028654))
#define SDC_GELU_3C ((float)(3 * 0.044715))

/* s = 1 / (1 + e), e = exp32(-2k (v + c v^3)); *e_out = e. */
__device__ __forceinline__ float sdc_gelu_s(float v, float *e_out) {
    float z = __fmul_rn(v, v);
    z = __fmul_rn(z, v);
    z = __fadd_rn(v, __fmul_rn(SDC_GELU_C, z));
    const float e = sdc_exp32(__fmul_rn(SDC_GELU_M2K, z));
    *e_out = e;
    return __fdiv_rn(1.0f, __fadd_rn(1.0f, e));
}

/* gelu(v). */
static __device__ __forceinline__ float sdc_gelu_one(float v) {
    float e;
    return __fmul_rn(v, sdc_gelu_s(v, &e));
}

/* y (n) = gelu(x (n)): float4 over the first n4 vectors when every pointer
 * is 16-byte aligned, then the tail; each element the same operations, so
 * the same bits (four independent elements a thread keep more loads in
 * flight: the one-float loop took 100 us at 8192 x 3072 on an H100). */
__global__ void sdc_gelu_kernel(float *__restrict__ y, const float *__restrict__ x, int64_t n, int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t i = t; i < n4; i += stride) {
        float4 v = ((const float4 *)x)[i];
        v.x = sdc_gelu_one(v.x);
        v.y = sdc_gelu_one(v.y);
        v.z = sdc_gelu_one(v.z);
        v.w = sdc_gelu_one(v.w);
        ((float4 *)y)[i] = v;
    }
    for (int64_t i = n4 * 4 + t; i < n; i += stride) y[i] = sdc_gelu_one(x[i]);
}

/* dy * gelu'(v). */
static __device__ __forceinline__ float sdc_gelu_grad_one(float d, float v) {
    const float a = __fadd_rn(__fmul_rn(SDC_GELU_3C, __fmul_rn(v, v)), 1.0f);
    float e;
    const float s = sdc_gelu_s(v, &e);
    float q = __fmul_rn(s, e);
    q = __fmul_rn(q, s);
    q = __fmul_rn(q, v);
    q = __fmul_rn(q, a);
    q = __fmul_rn(SDC_GELU_2K, q);
    return __fmul_rn(d, __fadd_rn(s, q));
}

/* dx (n) = dy (n) * gelu'(x (n)), vectors as the forward's; dx may be dy
 * (each element is read before it is written, by the same thread). */
__global__ void sdc_gelu_backward_kernel(float *dx, const float *dy, const float *__restrict__ x, int64_t n,
                                         int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t i = t; i < n4; i += stride) {
        const float4 v = ((const float4 *)x)[i];
        float4 d = ((const float4 *)dy)[i];
        d.x = sdc_gelu_grad_one(d.x, v.x);
        d.y = sdc_gelu_grad_one(d.y, v.y);
        d.z = sdc_gelu_grad_one(d.z, v.z);
        d.w = sdc_gelu_grad_one(d.w, v.w);
        ((float4 *)dx)[i] = d;
    }
    for (int64_t i = n4 * 4 + t; i < n; i += stride) dx[i] = sdc_gelu_grad_one(dy[i], x[i]);
}

/* ---- bf16 ---- */

#define SDC_GELU_BF16_K 0.7978845608028654f
#define SDC_GELU_BF16_A 0.044715f

static __device__ __forceinline__ float sdc_gelu_bf16(float x) {
    const float u = SDC_GELU_BF16_K * (x + SDC_GELU_BF16_A * x * x * x);
    return 0.5f * x * (1.f + tanhf(u));
}

static __device__ __forceinline__ float sdc_gelu_bf16_grad(float x) {
    const float u = SDC_GELU_BF16_K * (x + SDC_GELU_BF16_A * x * x * x);
    const float t = tanhf(u);
    return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * SDC_GELU_BF16_K * (1.f + 3.f * SDC_GELU_BF16_A * x * x);
}

__global__ void sdc_gelu_bf16_kernel(bf16 *__restrict__ out, const bf16 *__restrict__ inp, int64_t n) {
    const int64_t n8 = n >> 3;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n8) {
        float f[8];
        sdb_load8(inp + 8 * i, f);
#pragma unroll
        for (int k = 0; k < 8; k++) f[k] = sdc_gelu_bf16(f[k]);
        sdb_store8(out + 8 * i, f);
    } else if (i - n8 < (n & 7)) {
        const int64_t j = 8 * n8 + (i - n8);
        out[j] = __float2bfloat16(sdc_gelu_bf16(__bfloat162float(inp[j])));
    }
}

/* dinp may be dout: each element is read before it is written, by the same thread. */
__global__ void sdc_gelu_backward_bf16_kernel(bf16 *dinp, const bf16 *__restrict__ inp, const bf16 *dout, int64_t n) {
    const int64_t n8 = n >> 3;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n8) {
        float x[8], d[8];
        sdb_load8(inp + 8 * i, x);
        sdb_load8(dout + 8 * i, d);
#pragma unroll
        for (int k = 0; k < 8; k++) d[k] *= sdc_gelu_bf16_grad(x[k]);
        sdb_store8(dinp + 8 * i, d);
    } else if (i - n8 < (n & 7)) {
        const int64_t j = 8 * n8 + (i - n8);
        dinp[j] = __float2bfloat16(__bfloat162float(dout[j]) * sdc_gelu_bf16_grad(__bfloat162float(inp[j])));
    }
}

static int64_t sdc_gelu_bf16_blocks(int64_t n) { return ((n >> 3) + (n & 7) + 255) / 256; }

static unsigned sdc_gelu_blocks(int64_t n, int sm_count) {
    return (unsigned)sdc_grid(n, SDC_GELU_THREADS, sm_count, 16);
}

extern "C" int sdc_gelu(const sdc_ctx *c, sdc_dtype dtype, uint64_t y, uint64_t x, int64_t n) {
    if (!c || n < 0 || (n > 0 && (!y || !x))) return SD_FAIL(SD_ERR_ARG, "sdc_gelu: bad arguments");
    if (dtype == SDC_BF16 && (y % 16 || x % 16))
        return SD_FAIL(SD_ERR_ARG, "sdc_gelu: bf16 pointers not 16-byte aligned");
    if (dtype != SDC_F32 && dtype != SDC_BF16) return SD_FAIL(SD_ERR_ARG, "sdc_gelu: dtype %d", (int)dtype);
    if (n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    cudaStream_t s = (cudaStream_t)(uintptr_t)c->stream;
    if (dtype == SDC_BF16) {
        sdc_gelu_bf16_kernel<<<(unsigned)sdc_gelu_bf16_blocks(n), 256, 0, s>>>((bf16 *)(uintptr_t)y,
                                                                               (const bf16 *)(uintptr_t)x, n);
    } else {
        const int64_t n4 = sdc_aligned16(y) && sdc_aligned16(x) ? n / 4 : 0;
        sdc_gelu_kernel<<<sdc_gelu_blocks(n4 ? n4 : n, c->sm_count), SDC_GELU_THREADS, 0, s>>>(
            (float *)(uintptr_t)y, (const float *)(uintptr_t)x, n, n4);
    }
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_gelu_backward(const sdc_ctx *c, sdc_dtype dtype, uint64_t dx, uint64_t dy, uint64_t x,
                                 int64_t n) {
    if (!c || n < 0 || (n > 0 && (!dx || !dy || !x))) return SD_FAIL(SD_ERR_ARG, "sdc_gelu_backward: bad arguments");
    if (dtype == SDC_BF16 && (dx % 16 || dy % 16 || x % 16))
        return SD_FAIL(SD_ERR_ARG, "sdc_gelu_backward: bf16 pointers not 16-byte aligned");
    if (dtype != SDC_F32 && dtype != SDC_BF16) return SD_FAIL(SD_ERR_ARG, "sdc_gelu_backward: dtype %d", (int)dtype);
    if (n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    cudaStream_t s = (cudaStream_t)(uintptr_t)c->stream;
    if (dtype == SDC_BF16) {
        sdc_gelu_backward_bf16_kernel<<<(unsigned)sdc_gelu_bf16_blocks(n), 256, 0, s>>>(
            (bf16 *)(uintptr_t)dx, (const bf16 *)(uintptr_t)x, (const bf16 *)(uintptr_t)dy, n);
    } else {
        const int64_t n4 = sdc_aligned16(dx) && sdc_aligned16(dy) && sdc_aligned16(x) ? n / 4 : 0;
        sdc_gelu_backward_kernel<<<sdc_gelu_blocks(n4 ? n4 : n, c->sm_count), SDC_GELU_THREADS, 0, s>>>(
            (float *)(uintptr_t)dx, (const float *)(uintptr_t)dy, (const float *)(uintptr_t)x, n, n4);
    }
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
