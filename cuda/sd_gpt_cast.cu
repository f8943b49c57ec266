/*
 * sd_gpt_cast.cu: fp32 to bf16, element by element (symddp_gpt.h): the bf16
 * copy of the fp32 master weights that a step's GEMMs and kernels read.
 */
#include "sd_gpt.cuh"

#define SDG_CAST_THREADS 256

__global__ void sdg_cast_bf16_kernel(bf16 *__restrict__ out, const float *__restrict__ inp, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = __float2bfloat16_rn(inp[i]);
}

extern "C" int sdg_cast_bf16(void *out, const float *inp, int64_t n, void *stream) {
    if (n < 0) return SDG_FAIL(SDG_ERR_ARG, "sdg_cast_bf16: n=%lld", (long long)n);
    if (n == 0) return SDG_OK;
    if (!out || !inp) return SDG_FAIL(SDG_ERR_ARG, "sdg_cast_bf16: NULL pointer");
    int64_t blocks = (n + SDG_CAST_THREADS - 1) / SDG_CAST_THREADS;
    if (blocks > 132 * 16) blocks = 132 * 16;
    sdg_cast_bf16_kernel<<<(unsigned)blocks, SDG_CAST_THREADS, 0, (cudaStream_t)stream>>>((bf16 *)out, inp, n);
    SDG_LAUNCHED();
    return SDG_OK;
}
