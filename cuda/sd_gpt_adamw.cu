/*
 * sd_gpt_adamw.cu: AdamW over fp32 master weights with a bf16 copy of the
 * result (symddp_gpt.h). The hyperparameters are read from device memory by
 * the kernel, so a captured launch replays with whatever the host wrote there
 * before the replay. Per element, in PyTorch's order:
 *   g = grad * grad_scale
 *   p = p * (1 - lr * wd)                 (only where the chunk decays)
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   p = p - (lr / (1 - b1^step)) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)
 */
#include <math.h>

#include "sd_gpt.cuh"

__global__ void sdg_adamw_kernel(float *__restrict__ p, bf16 *__restrict__ pb, const float *__restrict__ g,
                                 float *__restrict__ m, float *__restrict__ v, const uint8_t *__restrict__ decay,
                                 int64_t chunk, int64_t n, const sdg_adamw_hyper *__restrict__ hp) {
    const sdg_adamw_hyper h = *hp;
    const float b1 = h.beta1, b2 = h.beta2;
    const float bc1 = 1.f - powf(b1, (float)h.step);
    const float bc2 = 1.f - powf(b2, (float)h.step);
    const float step_size = h.lr / bc1;
    const float bc2_sqrt = sqrtf(bc2);
    const float shrink = 1.f - h.lr * h.weight_decay;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float gi = g[i] * h.grad_scale;
        float pi = p[i];
        if (!decay || decay[i / chunk]) pi *= shrink;
        const float mi = b1 * m[i] + (1.f - b1) * gi;
        const float vi = b2 * v[i] + (1.f - b2) * gi * gi;
        pi -= step_size * mi / (sqrtf(vi) / bc2_sqrt + h.eps);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
        if (pb) pb[i] = __float2bfloat16(pi);
    }
}

extern "C" int sdg_adamw(float *params, void *params_bf16, const float *grads, float *m, float *v,
                         const uint8_t *decay, int64_t chunk, int64_t n, const sdg_adamw_hyper *hyper, void *stream) {
    if (n < 0 || !params || !grads || !m || !v || !hyper || (decay && chunk <= 0))
        return SDG_FAIL(SDG_ERR_ARG, "sdg_adamw: n=%lld chunk=%lld, or a NULL pointer", (long long)n,
                        (long long)chunk);
    if (n == 0) return SDG_OK;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 132 * 16) blocks = 132 * 16; /* grid-stride beyond that: the grid depends on n only */
    sdg_adamw_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(params, (bf16 *)params_bf16, grads, m, v,
                                                                         decay, chunk, n, hyper);
    SDG_LAUNCHED();
    return SDG_OK;
}
