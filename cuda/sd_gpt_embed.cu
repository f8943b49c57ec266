/*
 * sd_gpt_embed.cu: token + position embedding, forward and backward
 * (symddp_gpt.h).
 *
 * forward: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:], one thread per 8 channels;
 * without a position table (wpe NULL: a Llama, whose attention places the
 * tokens) out[b,t,:] = wte[tokens[b,t],:], and the backward has no dwpe.
 * backward, deterministic without float atomics:
 *   dwpe[t,:] += sum over b (in order) of dout[b,t,:], one thread per 8 channels;
 *   dwte: the N = B*T positions are sorted by token with CUB's radix sort
 *   (stable: positions of one token stay in increasing order), then a block per
 *   sorted index that starts a run of one token sums the run's dout rows in
 *   order (each thread 8 channels) and adds the sum to that token's row. The
 *   order of every addition depends only on the tokens.
 * Scratch (sdg_embed_backward_scratch_bytes): keys out, positions in and out
 * (int32 [N] each), then CUB's temporary storage, each 256-byte aligned.
 */
#include <cub/cub.cuh>

#include "sd_gpt.cuh"

#define SDG_EMB_THREADS 128

__global__ void sdg_embed_fwd_kernel(bf16 *__restrict__ out, const int32_t *__restrict__ tokens,
                                     const bf16 *__restrict__ wte, const bf16 *__restrict__ wpe, int N, int T,
                                     int C) {
    const int nv = C >> 3;
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)N * nv) return;
    const int row = (int)(idx / nv), v = (int)(idx % nv);
    const int t = row % T;
    const int tok = tokens[row];
    float a[8], p[8];
    sdg_load8(wte + (size_t)tok * C + 8 * v, a);
    if (wpe) {
        sdg_load8(wpe + (size_t)t * C + 8 * v, p);
#pragma unroll
        for (int k = 0; k < 8; k++) a[k] += p[k];
    }
    sdg_store8(out + (size_t)row * C + 8 * v, a);
}

__global__ void sdg_embed_iota_kernel(int32_t *p, int N) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) p[i] = i;
}

static __device__ __forceinline__ void sdg_add8_f32(float *dst, const float a[8]) {
    float4 *d = reinterpret_cast<float4 *>(dst);
    float4 x = d[0], y = d[1];
    x.x += a[0]; x.y += a[1]; x.z += a[2]; x.w += a[3];
    y.x += a[4]; y.y += a[5]; y.z += a[6]; y.w += a[7];
    d[0] = x;
    d[1] = y;
}

/* grid (N, ceil(C/8 / SDG_EMB_THREADS)): block x is a sorted index. */
__global__ void __launch_bounds__(SDG_EMB_THREADS)
    sdg_embed_wte_bwd_kernel(float *__restrict__ dwte, const bf16 *__restrict__ dout, const int32_t *__restrict__ keys,
                             const int32_t *__restrict__ pos, int N, int C) {
    const int i = blockIdx.x;
    const int tok = keys[i];
    if (i > 0 && keys[i - 1] == tok) return; /* not the start of the token's run */
    const int v = blockIdx.y * SDG_EMB_THREADS + threadIdx.x;
    if (v >= (C >> 3)) return;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int j = i; j < N && keys[j] == tok; j++) {
        float f[8];
        sdg_load8(dout + (size_t)pos[j] * C + 8 * v, f);
#pragma unroll
        for (int k = 0; k < 8; k++) acc[k] += f[k];
    }
    sdg_add8_f32(dwte + (size_t)tok * C + 8 * v, acc);
}

__global__ void sdg_embed_wpe_bwd_kernel(float *__restrict__ dwpe, const bf16 *__restrict__ dout, int B, int T,
                                         int C) {
    const int nv = C >> 3;
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * nv) return;
    const int t = idx / nv, v = idx % nv;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int b = 0; b < B; b++) {
        float f[8];
        sdg_load8(dout + ((size_t)b * T + t) * C + 8 * v, f);
#pragma unroll
        for (int k = 0; k < 8; k++) acc[k] += f[k];
    }
    sdg_add8_f32(dwpe + (size_t)t * C + 8 * v, acc);
}

static size_t sdg_round256(size_t x) { return (x + 255) & ~(size_t)255; }

static int sdg_embed_bits(int V) {
    int bits = 1;
    while (bits < 31 && (1 << bits) < V) bits++;
    return bits;
}

static size_t sdg_embed_cub_bytes(int N, int V) {
    size_t temp = 0;
    cudaError_t e = cub::DeviceRadixSort::SortPairs(NULL, temp, (const int32_t *)NULL, (int32_t *)NULL,
                                                    (const int32_t *)NULL, (int32_t *)NULL, N, 0,
                                                    sdg_embed_bits(V));
    return e == cudaSuccess ? temp : 0;
}

extern "C" int sdg_embed_forward(void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T,
                                 int C, void *stream) {
    if (B <= 0 || T <= 0 || C <= 0 || C % 8 != 0)
        return SDG_FAIL(SDG_ERR_ARG, "sdg_embed_forward: B=%d T=%d C=%d (C a multiple of 8)", B, T, C);
    if (!out || !tokens || !wte || !sdg_aligned16(out) || !sdg_aligned16(wte) || !sdg_aligned16(wpe))
        return SDG_FAIL(SDG_ERR_ARG, "sdg_embed_forward: NULL or unaligned pointer");
    const int N = B * T;
    const int64_t total = (int64_t)N * (C >> 3);
    sdg_embed_fwd_kernel<<<(unsigned)((total + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
        (bf16 *)out, tokens, (const bf16 *)wte, (const bf16 *)wpe, N, T, C);
    SDG_LAUNCHED();
    return SDG_OK;
}

extern "C" size_t sdg_embed_backward_scratch_bytes(int B, int T, int V) {
    if (B <= 0 || T <= 0 || V <= 0) return 0;
    const int N = B * T;
    const size_t cub_bytes = sdg_embed_cub_bytes(N, V);
    if (cub_bytes == 0) return 0;
    return 3 * sdg_round256((size_t)N * sizeof(int32_t)) + sdg_round256(cub_bytes);
}

extern "C" int sdg_embed_backward(float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T,
                                  int C, int V, void *scratch, size_t scratch_bytes, void *stream) {
    if (B <= 0 || T <= 0 || C <= 0 || C % 8 != 0 || V <= 0)
        return SDG_FAIL(SDG_ERR_ARG, "sdg_embed_backward: B=%d T=%d C=%d V=%d", B, T, C, V);
    if (!dwte || !dout || !tokens || !scratch || !sdg_aligned16(dwte) || !sdg_aligned16(dwpe) ||
        !sdg_aligned16(dout) || ((uintptr_t)scratch & 255u) != 0)
        return SDG_FAIL(SDG_ERR_ARG, "sdg_embed_backward: NULL or unaligned pointer (scratch: 256 bytes)");
    const int N = B * T;
    const size_t seg = sdg_round256((size_t)N * sizeof(int32_t));
    size_t cub_bytes = sdg_embed_cub_bytes(N, V);
    if (cub_bytes == 0 || scratch_bytes < 3 * seg + cub_bytes)
        return SDG_FAIL(SDG_ERR_ARG, "sdg_embed_backward: scratch of %zu bytes, want %zu", scratch_bytes,
                        sdg_embed_backward_scratch_bytes(B, T, V));
    unsigned char *base = (unsigned char *)scratch;
    int32_t *keys_out = (int32_t *)base;
    int32_t *pos_in = (int32_t *)(base + seg);
    int32_t *pos_out = (int32_t *)(base + 2 * seg);
    void *temp = base + 3 * seg;
    cudaStream_t s = (cudaStream_t)stream;

    sdg_embed_iota_kernel<<<(N + 255) / 256, 256, 0, s>>>(pos_in, N);
    SDG_LAUNCHED();
    SDG_CUDA(cub::DeviceRadixSort::SortPairs(temp, cub_bytes, tokens, keys_out, (const int32_t *)pos_in, pos_out, N,
                                             0, sdg_embed_bits(V), s));
    const int nv = C >> 3;
    dim3 grid((unsigned)N, (unsigned)((nv + SDG_EMB_THREADS - 1) / SDG_EMB_THREADS));
    sdg_embed_wte_bwd_kernel<<<grid, SDG_EMB_THREADS, 0, s>>>(dwte, (const bf16 *)dout, keys_out, pos_out, N, C);
    SDG_LAUNCHED();
    if (dwpe) {
        sdg_embed_wpe_bwd_kernel<<<(T * nv + 255) / 256, 256, 0, s>>>(dwpe, (const bf16 *)dout, B, T, C);
        SDG_LAUNCHED();
    }
    return SDG_OK;
}
