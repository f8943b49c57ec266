/*
 * sd_gpt_bias.cu: the bias gradient of a Linear layer, dbias (OC) fp32 =
 * column sums of dout (N,OC) bf16, deterministically (symddp_gpt.h). The
 * fused GPT takes it beside plain dW GEMMs: at GPT-2's shapes it costs less
 * than cuBLASLt's BGRAD_A epilogue adds to them (gptcheck's timings).
 *
 * Block (32 x 8 threads): lane x owns 8 columns (one 16-byte vector), row y
 * of the block sums rows blockIdx.y*8 + y, stepping by gridDim.y*8; the
 * block adds its 8 rows in order into one partial per (blockIdx.y, column);
 * a second kernel adds the partials in blockIdx.y order into dbias. The grid
 * depends only on N and OC.
 */
#include "sd_gpt.cuh"

#define SDG_BIAS_ROWS 8        /* thread rows per block */
#define SDG_BIAS_MAX_CHUNKS 64 /* gridDim.y: the partials */

static int sdg_bias_chunks(int N) {
    const int c = (N + 255) / 256;
    return c < 1 ? 1 : (c > SDG_BIAS_MAX_CHUNKS ? SDG_BIAS_MAX_CHUNKS : c);
}

__global__ void __launch_bounds__(32 * SDG_BIAS_ROWS)
    sdg_bias_bwd_kernel(float *__restrict__ partial, const bf16 *__restrict__ dout, int N, int OC) {
    __shared__ float sm[SDG_BIAS_ROWS][32 * 8 + 4];
    const int lane = threadIdx.x, y = threadIdx.y;
    const int v = blockIdx.x * 32 + lane;
    const bool on = v < (OC >> 3);
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (on)
        for (int r = blockIdx.y * SDG_BIAS_ROWS + y; r < N; r += gridDim.y * SDG_BIAS_ROWS) {
            float f[8];
            sdg_load8(dout + (size_t)r * OC + 8 * v, f);
#pragma unroll
            for (int k = 0; k < 8; k++) acc[k] += f[k];
        }
#pragma unroll
    for (int k = 0; k < 8; k++) sm[y][8 * lane + k] = acc[k];
    __syncthreads();
    /* 256 threads, 256 columns of the block: thread t sums column t over the 8 rows */
    const int t = y * 32 + lane;
    const int col = blockIdx.x * 256 + t;
    if (col < OC) {
        float s = 0.f;
#pragma unroll
        for (int k = 0; k < SDG_BIAS_ROWS; k++) s += sm[k][t];
        partial[(size_t)blockIdx.y * OC + col] = s;
    }
}

__global__ void sdg_bias_bwd_reduce_kernel(float *__restrict__ dbias, const float *__restrict__ partial, int G,
                                           int OC) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) return;
    float s = 0.f;
    for (int g = 0; g < G; g++) s += partial[(size_t)g * OC + c];
    dbias[c] = s;
}

extern "C" size_t sdg_bias_backward_scratch_bytes(int N, int OC) {
    if (N <= 0 || OC <= 0) return 0;
    return (size_t)sdg_bias_chunks(N) * (size_t)OC * sizeof(float);
}

extern "C" int sdg_bias_backward(float *dbias, const void *dout, int N, int OC, void *scratch, void *stream) {
    if (N <= 0 || OC <= 0 || OC % 8 != 0)
        return SDG_FAIL(SDG_ERR_ARG, "sdg_bias_backward: N=%d OC=%d (OC a multiple of 8)", N, OC);
    if (!dbias || !dout || !scratch || !sdg_aligned16(dout))
        return SDG_FAIL(SDG_ERR_ARG, "sdg_bias_backward: NULL or unaligned pointer");
    const int G = sdg_bias_chunks(N);
    cudaStream_t s = (cudaStream_t)stream;
    dim3 grid((unsigned)((OC + 255) / 256), (unsigned)G), block(32, SDG_BIAS_ROWS);
    sdg_bias_bwd_kernel<<<grid, block, 0, s>>>((float *)scratch, (const bf16 *)dout, N, OC);
    SDG_LAUNCHED();
    sdg_bias_bwd_reduce_kernel<<<(OC + 255) / 256, 256, 0, s>>>(dbias, (const float *)scratch, G, OC);
    SDG_LAUNCHED();
    return SDG_OK;
}
