/*
 * sd_gpt_gelu.cu: GELU with the tanh approximation (GPT-2's), bf16, eight
 * elements per 16-byte load (symddp_gpt.h).
 *   gelu(x)  = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
 *   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 * Thread i < n/8 handles the vector i; the last n % 8 elements one thread each.
 */
#include "sd_gpt.cuh"

#define SDG_GELU_K 0.7978845608028654f
#define SDG_GELU_A 0.044715f

static __device__ __forceinline__ float sdg_gelu(float x) {
    const float u = SDG_GELU_K * (x + SDG_GELU_A * x * x * x);
    return 0.5f * x * (1.f + tanhf(u));
}

static __device__ __forceinline__ float sdg_gelu_grad(float x) {
    const float u = SDG_GELU_K * (x + SDG_GELU_A * x * x * x);
    const float t = tanhf(u);
    return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * SDG_GELU_K * (1.f + 3.f * SDG_GELU_A * x * x);
}

__global__ void sdg_gelu_fwd_kernel(bf16 *__restrict__ out, const bf16 *__restrict__ inp, int64_t n) {
    const int64_t n8 = n >> 3;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n8) {
        float f[8];
        sdg_load8(inp + 8 * i, f);
#pragma unroll
        for (int k = 0; k < 8; k++) f[k] = sdg_gelu(f[k]);
        sdg_store8(out + 8 * i, f);
    } else if (i - n8 < (n & 7)) {
        const int64_t j = 8 * n8 + (i - n8);
        out[j] = __float2bfloat16(sdg_gelu(__bfloat162float(inp[j])));
    }
}

/* dinp may be dout: each element is read before it is written, by the same thread. */
__global__ void sdg_gelu_bwd_kernel(bf16 *dinp, const bf16 *__restrict__ inp, const bf16 *dout, int64_t n) {
    const int64_t n8 = n >> 3;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n8) {
        float x[8], d[8];
        sdg_load8(inp + 8 * i, x);
        sdg_load8(dout + 8 * i, d);
#pragma unroll
        for (int k = 0; k < 8; k++) d[k] *= sdg_gelu_grad(x[k]);
        sdg_store8(dinp + 8 * i, d);
    } else if (i - n8 < (n & 7)) {
        const int64_t j = 8 * n8 + (i - n8);
        dinp[j] = __float2bfloat16(__bfloat162float(dout[j]) * sdg_gelu_grad(__bfloat162float(inp[j])));
    }
}

static int64_t sdg_gelu_blocks(int64_t n) { return ((n >> 3) + (n & 7) + 255) / 256; }

extern "C" int sdg_gelu_forward(void *out, const void *inp, int64_t n, void *stream) {
    if (n < 0 || !out || !inp || !sdg_aligned16(out) || !sdg_aligned16(inp))
        return SDG_FAIL(SDG_ERR_ARG, "sdg_gelu_forward: n=%lld, NULL or unaligned pointer", (long long)n);
    if (n == 0) return SDG_OK;
    sdg_gelu_fwd_kernel<<<(unsigned)sdg_gelu_blocks(n), 256, 0, (cudaStream_t)stream>>>((bf16 *)out,
                                                                                      (const bf16 *)inp, n);
    SDG_LAUNCHED();
    return SDG_OK;
}

extern "C" int sdg_gelu_backward(void *dinp, const void *inp, const void *dout, int64_t n, void *stream) {
    if (n < 0 || !dinp || !inp || !dout || !sdg_aligned16(dinp) || !sdg_aligned16(inp) || !sdg_aligned16(dout))
        return SDG_FAIL(SDG_ERR_ARG, "sdg_gelu_backward: n=%lld, NULL or unaligned pointer", (long long)n);
    if (n == 0) return SDG_OK;
    sdg_gelu_bwd_kernel<<<(unsigned)sdg_gelu_blocks(n), 256, 0, (cudaStream_t)stream>>>(
        (bf16 *)dinp, (const bf16 *)inp, (const bf16 *)dout, n);
    SDG_LAUNCHED();
    return SDG_OK;
}
