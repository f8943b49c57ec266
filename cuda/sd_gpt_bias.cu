/*
 * sd_gpt_bias.cu: the bias gradient of a Linear layer, dbias (OC) fp32 =
 * column sums of dout (N,OC) bf16, deterministically (symddp_gpt.h). The
 * fused GPT takes it beside plain dW GEMMs: at GPT-2's shapes it costs less
 * than cuBLASLt's BGRAD_A epilogue adds to them (gptcheck's timings).
 *
 * Partials (block 32 x 8 threads, grid (OC/256, G)): lane x owns 8 columns
 * (one 16-byte vector), block row y sums rows y, y+8, ... of the block's
 * chunk of R rows (chunk blockIdx.y: rows blockIdx.y*R ..), the loads
 * unrolled so that several are in flight per thread; the block adds its 8
 * rows in order into one partial per (chunk, column). Then the reduction
 * (block 32 x 8, grid OC/32): thread (x, y) adds the partials of chunks y,
 * y+8, ... of column 32 blockIdx.x + x in that order, and the 8 sums are
 * added in y order into dbias. G and R depend only on N, so the order of
 * every sum, and the bits, repeat.
 *
 * The chunks are short (64 rows up to 32768 rows, then G stays 512) so that
 * a narrow dout (768 columns: 3 blocks across) still spreads over the GPU:
 * with 64 chunks of 256 rows, each thread waited on 32 loads in a row and the
 * reduction's 3 blocks on 64 each.
 */
#include "sd_gpt.cuh"

#define SDG_BIAS_ROWS 8         /* thread rows per block */
#define SDG_BIAS_CHUNK 64       /* rows per chunk, at least */
#define SDG_BIAS_MAX_CHUNKS 512 /* gridDim.y: the partials */

static int sdg_bias_chunks(int N) {
    const int c = (N + SDG_BIAS_CHUNK - 1) / SDG_BIAS_CHUNK;
    return c < 1 ? 1 : (c > SDG_BIAS_MAX_CHUNKS ? SDG_BIAS_MAX_CHUNKS : c);
}

/* rows per chunk: a multiple of 8, G chunks cover N */
static int sdg_bias_chunk_rows(int N, int G) {
    const int r = (N + G - 1) / G;
    return (r + SDG_BIAS_ROWS - 1) / SDG_BIAS_ROWS * SDG_BIAS_ROWS;
}

__global__ void __launch_bounds__(32 * SDG_BIAS_ROWS)
    sdg_bias_bwd_kernel(float *__restrict__ partial, const bf16 *__restrict__ dout, int N, int OC, int R) {
    __shared__ float sm[SDG_BIAS_ROWS][32 * 8 + 4];
    const int lane = threadIdx.x, y = threadIdx.y;
    const int v = blockIdx.x * 32 + lane;
    const bool on = v < (OC >> 3);
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (on) {
        const int r0 = blockIdx.y * R, r1 = min(r0 + R, N);
        const bf16 *p = dout + 8 * (size_t)v;
        int r = r0 + y;
        /* eight rows a round (a chunk of 64 rows is one round): the loads
         * first, then the adds in row order */
        for (; r + 7 * SDG_BIAS_ROWS < r1; r += 8 * SDG_BIAS_ROWS) {
            uint4 u[8];
#pragma unroll
            for (int i = 0; i < 8; i++)
                u[i] = *reinterpret_cast<const uint4 *>(p + (size_t)(r + i * SDG_BIAS_ROWS) * OC);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                float f[8];
                sdg_unpack8(u[i], f);
#pragma unroll
                for (int k = 0; k < 8; k++) acc[k] += f[k];
            }
        }
        for (; r < r1; r += SDG_BIAS_ROWS) {
            float f[8];
            sdg_load8(p + (size_t)r * OC, f);
#pragma unroll
            for (int k = 0; k < 8; k++) acc[k] += f[k];
        }
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

__global__ void __launch_bounds__(32 * SDG_BIAS_ROWS)
    sdg_bias_bwd_reduce_kernel(float *__restrict__ dbias, const float *__restrict__ partial, int G, int OC) {
    __shared__ float sm[SDG_BIAS_ROWS][33];
    const int lane = threadIdx.x, y = threadIdx.y;
    const int c = blockIdx.x * 32 + lane;
    float s = 0.f;
    if (c < OC) {
        int g = y;
        for (; g + 3 * SDG_BIAS_ROWS < G; g += 4 * SDG_BIAS_ROWS) {
            float f[4];
#pragma unroll
            for (int i = 0; i < 4; i++) f[i] = partial[(size_t)(g + i * SDG_BIAS_ROWS) * OC + c];
#pragma unroll
            for (int i = 0; i < 4; i++) s += f[i];
        }
        for (; g < G; g += SDG_BIAS_ROWS) s += partial[(size_t)g * OC + c];
    }
    sm[y][lane] = s;
    __syncthreads();
    if (y == 0 && c < OC) {
        float t = 0.f;
#pragma unroll
        for (int k = 0; k < SDG_BIAS_ROWS; k++) t += sm[k][lane];
        dbias[c] = t;
    }
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
    const int G = sdg_bias_chunks(N), R = sdg_bias_chunk_rows(N, G);
    cudaStream_t s = (cudaStream_t)stream;
    dim3 grid((unsigned)((OC + 255) / 256), (unsigned)G), block(32, SDG_BIAS_ROWS);
    sdg_bias_bwd_kernel<<<grid, block, 0, s>>>((float *)scratch, (const bf16 *)dout, N, OC, R);
    SDG_LAUNCHED();
    sdg_bias_bwd_reduce_kernel<<<(OC + 31) / 32, block, 0, s>>>(dbias, (const float *)scratch, G, OC);
    SDG_LAUNCHED();
    return SDG_OK;
}
