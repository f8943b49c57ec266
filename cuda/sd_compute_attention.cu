/*
 * sd_compute_attention.cu: causal self-attention. In fp32, the causal
 * softmax and its backward (compute.Attention's plan in compute/cuda runs
 * them between sdc_gemm_batched's products per head); in bf16, the
 * launchers of the flash attention (sdc_attention_bf16,
 * sdc_grouped_attention_bf16 and their backward: "bf16" below), which check
 * the arguments and run the kernels of sd_compute_attention_wmma.cu,
 * sd_compute_attention_mma.cu or sd_compute_attention_cudnn.cu.
 *
 * fp32:
 * p is nmat matrices of t x t back to back, row i of each the scores of
 * query i against keys 0..t-1. A row goes to eight lanes of a warp
 * (sd_compute.cuh), which do internal/hostloops' goSoftmaxCausal and
 * goSoftmaxCausalBackward (for a whole matrix: r0 0, width t) in their
 * order: the maximum and the sums in sum8's eight lanes and tail, e^x by
 * exp32, round-to-nearest intrinsics. Lane a reads and writes only the
 * entries a, a+8, ... of its row (the tail's entries reach the other lanes
 * by shuffle), so the rows update in place without a barrier.
 */
#include <stdio.h>

#include "sd_compute.cuh"
#include "sd_compute_attention.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

#define SDC_SOFTMAX_THREADS 256 /* 32 rows a block, eight lanes a row */

/* Row i of each matrix becomes the softmax of its first n = i+1 entries, zeros after (goSoftmaxCausal). */
__global__ void __launch_bounds__(SDC_SOFTMAX_THREADS)
    sdc_softmax_causal_kernel(float *__restrict__ p, int64_t nrows, int64_t t) {
    const int lane = threadIdx.x & 7;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
    const bool ok = row < nrows; /* the lanes of a row past the end still shuffle */
    float *pr = p + (ok ? row : 0) * t;
    const int64_t n = (ok ? row : 0) % t + 1;

    /* max8 of the first n: the lanes' maxima, the tail into lane 0's, then lanes 1..7 */
    const int64_t lead = n & ~(int64_t)7;
    const int nt = ok ? (int)(n - lead) : 0;
    float mx = __int_as_float(0xff800000); /* -inf */
    if (ok)
        for (int64_t j = lane; j < lead; j += 8) {
            const float v = pr[j];
            if (v > mx) mx = v;
        }
    float ms[8], tails[8];
    sdc_lanes8(mx, ms);
    sdc_lanes8(lane < nt ? pr[lead + lane] : 0.0f, tails);
    float m = ms[0];
    for (int i = 0; i < nt; i++)
        if (tails[i] > m) m = tails[i];
    for (int i = 1; i < 8; i++)
        if (ms[i] > m) m = ms[i];

    /*
     * e = exp32(s - m) over the first n, zeros after; its sum8 runs over np,
     * n rounded up to a multiple of eight (at most t): the lanes over the
     * multiple of eight below np, the tail (when np is t) after them.
     */
    const int64_t np = ((n + 7) & ~(int64_t)7) < t ? ((n + 7) & ~(int64_t)7) : t;
    const int64_t lead2 = np & ~(int64_t)7;
    float a = 0.0f, te = 0.0f;
    if (ok)
        for (int64_t j = lane; j < t; j += 8) {
            if (j >= n) {
                pr[j] = 0.0f;
                continue;
            }
            const float e = sdc_exp32(__fsub_rn(pr[j], m));
            pr[j] = e;
            if (j < lead2)
                a = __fadd_rn(a, e);
            else
                te = e; /* entry lead2 + lane of the sum's tail */
        }
    float tes[8];
    sdc_lanes8(te, tes);
    float s = sdc_sum8(a);
    for (int i = 0; i < (int)(np - lead2); i++) s = __fadd_rn(s, tes[i]);
    const float inv = __fdiv_rn(1.0f, s);
    if (!ok) return;
    for (int64_t j = lane; j < n; j += 8) pr[j] = __fmul_rn(pr[j], inv);
}

/* ds row i (the gradient at p's) becomes p * (ds - sum8(p * ds)) over its first i+1, zeros after. */
__global__ void __launch_bounds__(SDC_SOFTMAX_THREADS)
    sdc_softmax_causal_backward_kernel(float *__restrict__ ds, const float *__restrict__ p, int64_t nrows,
                                       int64_t t) {
    const int lane = threadIdx.x & 7;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
    const bool ok = row < nrows;
    const int64_t r = ok ? row : 0;
    float *g = ds + r * t;
    const float *pr = p + r * t;
    const int64_t n = r % t + 1;
    const int64_t lead = n & ~(int64_t)7;
    const int nt = ok ? (int)(n - lead) : 0;
    float a = 0.0f;
    if (ok)
        for (int64_t j = lane; j < lead; j += 8) a = __fadd_rn(a, __fmul_rn(pr[j], g[j]));
    float tails[8];
    sdc_lanes8(lane < nt ? __fmul_rn(pr[lead + lane], g[lead + lane]) : 0.0f, tails);
    float s = sdc_sum8(a);
    for (int i = 0; i < nt; i++) s = __fadd_rn(s, tails[i]);
    if (!ok) return;
    for (int64_t j = lane; j < t; j += 8) g[j] = j < n ? __fmul_rn(pr[j], __fsub_rn(g[j], s)) : 0.0f;
}

/* The blocks of nmat matrices of t rows, or -1 when the sizes do not fit. */
static int64_t sdc_softmax_blocks(int64_t nmat, int64_t t) {
    if (nmat < 0 || t < 0 || (t > 0 && (nmat > INT64_MAX / t || nmat * t > INT64_MAX / t))) return -1;
    const int64_t rows_per_block = SDC_SOFTMAX_THREADS / 8;
    const int64_t blocks = (nmat * t + rows_per_block - 1) / rows_per_block;
    return blocks > 0x7fffffff ? -1 : blocks;
}

extern "C" int sdc_softmax_causal(const sdc_ctx *c, uint64_t p, int64_t nmat, int64_t t) {
    const int64_t blocks = sdc_softmax_blocks(nmat, t);
    if (!c || blocks < 0)
        return SD_FAIL(SD_ERR_ARG, "sdc_softmax_causal: bad arguments (%lld matrices of %lld)", (long long)nmat,
                       (long long)t);
    if (blocks == 0) return SD_OK;
    if (!p) return SD_FAIL(SD_ERR_ARG, "sdc_softmax_causal: NULL pointer");
    SD_TRY(sdc_use_device(c->device));
    sdc_softmax_causal_kernel<<<(unsigned)blocks, SDC_SOFTMAX_THREADS, 0, (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)p, nmat * t, t);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_softmax_causal_backward(const sdc_ctx *c, uint64_t ds, uint64_t p, int64_t nmat, int64_t t) {
    const int64_t blocks = sdc_softmax_blocks(nmat, t);
    if (!c || blocks < 0)
        return SD_FAIL(SD_ERR_ARG, "sdc_softmax_causal_backward: bad arguments (%lld matrices of %lld)",
                       (long long)nmat, (long long)t);
    if (blocks == 0) return SD_OK;
    if (!ds || !p) return SD_FAIL(SD_ERR_ARG, "sdc_softmax_causal_backward: NULL pointer");
    SD_TRY(sdc_use_device(c->device));
    sdc_softmax_causal_backward_kernel<<<(unsigned)blocks, SDC_SOFTMAX_THREADS, 0,
                                         (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)ds, (const float *)(uintptr_t)p, nmat * t, t);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/* ---- bf16: the flash attention's launchers ---- */

/* Whether v is a positive int. */
static bool sdc_att_pos(int64_t v) { return v > 0 && v <= INT_MAX; }

static bool sdc_att_impl_ok(sdc_attn impl) { return impl >= SDC_ATTN_AUTO && impl <= SDC_ATTN_CUDNN; }

/* Why the wmma kernels do not take a shape (NULL: they do): head size 32 or
 * 64, T a multiple of 64, at most 65535 sequences' heads (their grid). */
static const char *sdc_att_wmma_why(int B, int T, int NH, int HS, char *buf, size_t cap) {
    if (HS != 32 && HS != 64) snprintf(buf, cap, "head size %d (want 32 or 64)", HS);
    else if (T % 64 != 0) snprintf(buf, cap, "T=%d is not a multiple of 64", T);
    else if ((long long)B * NH > 65535) snprintf(buf, cap, "B*NH=%lld too large", (long long)B * NH);
    else return NULL;
    return buf;
}

/* Why the mma kernels do not take a shape of packed qkv (NULL: they do). */
static const char *sdc_att_mma_why(int B, int T, int C, int NH, char *buf, size_t cap) {
    if (!sdc_am_supported(T, C, NH))
        snprintf(buf, cap, "B=%d T=%d C=%d NH=%d (want head size 64, T a multiple of 128)", B, T, C, NH);
    else if ((long long)B * NH > 65535) snprintf(buf, cap, "B*NH=%lld too large", (long long)B * NH);
    else return NULL;
    return buf;
}

/* The packed attention's sizes: positive ints, C a multiple of NH, every
 * index of qkv within an int. */
static bool sdc_att_packed_ok(int64_t B, int64_t T, int64_t C, int64_t NH) {
    return sdc_att_pos(B) && sdc_att_pos(T) && sdc_att_pos(C) && sdc_att_pos(NH) && C % NH == 0 &&
           B * T <= INT_MAX / 3 / C;
}

/* The grouped attention's sizes: positive ints, NH a multiple of KVH, every
 * index of q (the widest) within an int. */
static bool sdc_att_grouped_ok(int64_t B, int64_t T, int64_t NH, int64_t KVH, int64_t HS) {
    return sdc_att_pos(B) && sdc_att_pos(T) && sdc_att_pos(NH) && sdc_att_pos(KVH) && sdc_att_pos(HS) &&
           NH % KVH == 0 && NH <= INT_MAX / HS && B * T <= INT_MAX / (NH * HS);
}

/* What SDC_ATTN_AUTO runs for packed qkv at a shape (sizes checked). */
static sdc_attn sdc_att_auto(int B, int T, int C, int NH, cudaStream_t s) {
    if (sdc_att_use_cudnn(sdc_att_packed(NULL, NULL, C, NH), B, T, C / NH, s)) return SDC_ATTN_CUDNN;
    if (sdc_am_supported(T, C, NH)) return SDC_ATTN_MMA;
    return SDC_ATTN_WMMA;
}

/* The checks every packed launcher makes before its pointers'. */
static int sdc_att_packed_args(const char *what, const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t T, int64_t C,
                               int64_t NH) {
    if (!c || !sdc_att_impl_ok(impl)) return SD_FAIL(SD_ERR_ARG, "%s: no context, or impl %d", what, (int)impl);
    if (!sdc_att_packed_ok(B, T, C, NH))
        return SD_FAIL(SD_ERR_ARG, "%s: B=%lld T=%lld C=%lld NH=%lld", what, (long long)B, (long long)T, (long long)C,
                       (long long)NH);
    return SD_OK;
}

/* impl's kernels on packed qkv, or why not (what names the call). */
static int sdc_att_packed_shape(const char *what, sdc_attn impl, int B, int T, int C, int NH) {
    char buf[160];
    const char *why = impl == SDC_ATTN_MMA ? sdc_att_mma_why(B, T, C, NH, buf, sizeof buf)
                                           : sdc_att_wmma_why(B, T, NH, C / NH, buf, sizeof buf);
    if (why) return SD_FAIL(SD_ERR_ARG, "%s (%s): %s", what, impl == SDC_ATTN_MMA ? "mma" : "wmma", why);
    return SD_OK;
}

extern "C" int sdc_attention_bf16(const sdc_ctx *c, sdc_attn impl, uint64_t out, uint64_t lse, uint64_t qkv,
                                  int64_t B, int64_t T, int64_t C, int64_t NH) {
    static const char what[] = "sdc_attention_bf16";
    SD_TRY(sdc_att_packed_args(what, c, impl, B, T, C, NH));
    if (!out || !lse || !qkv || out % 16 || qkv % 16) return SD_FAIL(SD_ERR_ARG, "%s: NULL or unaligned pointer", what);
    SD_TRY(sdc_use_device(c->device));
    cudaStream_t s = (cudaStream_t)(uintptr_t)c->stream;
    const int b = (int)B, t = (int)T, ch = (int)C, nh = (int)NH;
    if (impl == SDC_ATTN_AUTO) impl = sdc_att_auto(b, t, ch, nh, s);
    void *o = (void *)(uintptr_t)out;
    float *l = (float *)(uintptr_t)lse;
    const void *x = (const void *)(uintptr_t)qkv;
    if (impl == SDC_ATTN_CUDNN) return sdc_att_cudnn_forward(what, o, l, sdc_att_packed(x, NULL, ch, nh), b, t, ch / nh, s);
    SD_TRY(sdc_att_packed_shape(what, impl, b, t, ch, nh));
    if (impl == SDC_ATTN_MMA) return sdc_am_forward_io(o, l, sdc_att_packed(x, NULL, ch, nh), b, t, s);
    return sdc_att_forward_io(o, l, sdc_att_packed(x, NULL, ch, nh), b, t, ch / nh, s);
}

extern "C" int sdc_attention_backward_bf16(const sdc_ctx *c, sdc_attn impl, uint64_t dqkv, uint64_t dout,
                                           uint64_t qkv, uint64_t out, uint64_t lse, int64_t B, int64_t T, int64_t C,
                                           int64_t NH, uint64_t scratch) {
    static const char what[] = "sdc_attention_backward_bf16";
    SD_TRY(sdc_att_packed_args(what, c, impl, B, T, C, NH));
    if (!dqkv || !dout || !qkv || !out || !lse || !scratch || dqkv % 16 || dout % 16 || qkv % 16 || out % 16)
        return SD_FAIL(SD_ERR_ARG, "%s: NULL or unaligned pointer", what);
    SD_TRY(sdc_use_device(c->device));
    cudaStream_t s = (cudaStream_t)(uintptr_t)c->stream;
    const int b = (int)B, t = (int)T, ch = (int)C, nh = (int)NH;
    if (impl == SDC_ATTN_AUTO) impl = sdc_att_auto(b, t, ch, nh, s);
    void *dx = (void *)(uintptr_t)dqkv, *sc = (void *)(uintptr_t)scratch;
    const void *dy = (const void *)(uintptr_t)dout, *x = (const void *)(uintptr_t)qkv,
               *o = (const void *)(uintptr_t)out;
    const float *l = (const float *)(uintptr_t)lse;
    if (impl == SDC_ATTN_CUDNN)
        return sdc_att_cudnn_backward(what, sdc_att_packed(x, dx, ch, nh), dy, o, l, b, t, ch / nh, sc, s);
    SD_TRY(sdc_att_packed_shape(what, impl, b, t, ch, nh));
    if (impl == SDC_ATTN_MMA) return sdc_am_backward_io(sdc_att_packed(x, dx, ch, nh), dy, o, l, b, t, sc, s);
    return sdc_att_backward_io(sdc_att_packed(x, dx, ch, nh), dy, o, l, b, t, ch / nh, sc, s);
}

extern "C" int sdc_attention_backward_bf16_scratch_bytes(const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t T,
                                                         int64_t C, int64_t NH, int64_t *bytes) {
    static const char what[] = "sdc_attention_backward_bf16_scratch_bytes";
    if (!bytes) return SD_FAIL(SD_ERR_ARG, "%s: no result", what);
    *bytes = 0;
    if (!c || !sdc_att_impl_ok(impl)) return SD_FAIL(SD_ERR_ARG, "%s: no context, or impl %d", what, (int)impl);
    if (!sdc_att_packed_ok(B, T, C, NH)) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    const int b = (int)B, t = (int)T, ch = (int)C, nh = (int)NH;
    if (impl == SDC_ATTN_AUTO) impl = sdc_att_auto(b, t, ch, nh, (cudaStream_t)(uintptr_t)c->stream);
    char buf[160];
    switch (impl) {
    case SDC_ATTN_CUDNN: /* its workspace, where its plans build */
        *bytes = (int64_t)sdc_att_cudnn_scratch_bytes(sdc_att_packed(NULL, NULL, ch, nh), b, t, ch / nh);
        break;
    case SDC_ATTN_MMA: /* D and the dS^T tiles */
        if (!sdc_att_mma_why(b, t, ch, nh, buf, sizeof buf)) *bytes = (int64_t)sdc_am_backward_scratch_bytes(b, t, nh);
        break;
    default: /* D: one float a row */
        if (!sdc_att_wmma_why(b, t, nh, ch / nh, buf, sizeof buf)) *bytes = (int64_t)B * NH * T * (int64_t)sizeof(float);
    }
    return SD_OK;
}

extern "C" int sdc_attention_bf16_supported(const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t T, int64_t C,
                                            int64_t NH, sdc_flag *supported) {
    static const char what[] = "sdc_attention_bf16_supported";
    if (!supported) return SD_FAIL(SD_ERR_ARG, "%s: no result", what);
    *supported = 0;
    if (!c || !sdc_att_impl_ok(impl)) return SD_FAIL(SD_ERR_ARG, "%s: no context, or impl %d", what, (int)impl);
    if (!sdc_att_packed_ok(B, T, C, NH)) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    const int b = (int)B, t = (int)T, ch = (int)C, nh = (int)NH;
    if (impl == SDC_ATTN_AUTO) impl = sdc_att_auto(b, t, ch, nh, (cudaStream_t)(uintptr_t)c->stream);
    char buf[160];
    switch (impl) {
    case SDC_ATTN_CUDNN:
        *supported = sdc_att_cudnn_supported(sdc_att_packed(NULL, NULL, ch, nh), b, t, ch / nh) ? 1 : 0;
        break;
    case SDC_ATTN_MMA:
        *supported = sdc_att_mma_why(b, t, ch, nh, buf, sizeof buf) ? 0 : 1;
        break;
    default:
        *supported = sdc_att_wmma_why(b, t, nh, ch / nh, buf, sizeof buf) ? 0 : 1;
    }
    return SD_OK;
}

/* Whether the mma kernels take a grouped shape (head size 64, T a multiple of 128). */
static bool sdc_gqa_mma(int T, int NH, int HS) { return HS == 64 && sdc_am_supported(T, NH * HS, NH); }

/* Packed qkv (and dqkv, 0 for the forward) of a grouped shape as an io: the
 * keys NH*HS and the values (NH+KVH)*HS elements into a row of
 * (NH+2*KVH)*HS. */
static sdc_att_io sdc_gqa_io(uint64_t qkv, uint64_t dqkv, int NH, int KVH, int HS) {
    const uint64_t ko = 2 * (uint64_t)(NH * HS), vo = 2 * (uint64_t)((NH + KVH) * HS); /* bytes */
    const int ld = (NH + 2 * KVH) * HS;
    sdc_att_io io = {(const bf16 *)(uintptr_t)qkv,
                     qkv ? (const bf16 *)(uintptr_t)(qkv + ko) : NULL,
                     qkv ? (const bf16 *)(uintptr_t)(qkv + vo) : NULL,
                     (bf16 *)(uintptr_t)dqkv,
                     dqkv ? (bf16 *)(uintptr_t)(dqkv + ko) : NULL,
                     dqkv ? (bf16 *)(uintptr_t)(dqkv + vo) : NULL,
                     ld,
                     ld,
                     NH,
                     NH / KVH};
    return io;
}

/* The rule of SDC_ATTN_AUTO and of our kernels for grouped attention at a
 * checked shape on the context's device: resolves *impl (AUTO: cuDNN's
 * where its plans build, unless SYMDDP_ATTENTION says otherwise, else the
 * mma kernels where they apply, else wmma) and returns 0, or 1 when the
 * wmma kernels do not take the shape, 2 when the mma ones asked for do not,
 * with why. SDC_ATTN_CUDNN is not checked here: cuDNN's launchers say why
 * they cannot, the queries ask sdc_att_cudnn_supported. */
static int sdc_gqa_resolve(sdc_attn *impl, int B, int T, int NH, int KVH, int HS, cudaStream_t s, char *why,
                           size_t cap) {
    if (*impl == SDC_ATTN_AUTO && sdc_att_use_cudnn(sdc_gqa_io(0, 0, NH, KVH, HS), B, T, HS, s))
        *impl = SDC_ATTN_CUDNN;
    if (*impl == SDC_ATTN_CUDNN) return 0;
    if (sdc_att_wmma_why(B, T, NH, HS, why, cap)) return 1;
    const bool mma = sdc_gqa_mma(T, NH, HS);
    if (*impl == SDC_ATTN_MMA && !mma) {
        snprintf(why, cap, "B=%d T=%d NH=%d KVH=%d HS=%d (want head size 64, T a multiple of 128)", B, T, NH, KVH, HS);
        return 2;
    }
    if (*impl == SDC_ATTN_AUTO) *impl = mma ? SDC_ATTN_MMA : SDC_ATTN_WMMA;
    return 0;
}

/* sdc_gqa_resolve for a launcher: the kernels impl runs, or why not. */
static int sdc_gqa_impl(const char *what, sdc_attn *impl, int B, int T, int NH, int KVH, int HS, cudaStream_t s) {
    char buf[160];
    switch (sdc_gqa_resolve(impl, B, T, NH, KVH, HS, s, buf, sizeof buf)) {
    case 1: return SD_FAIL(SD_ERR_ARG, "%s: %s", what, buf);
    case 2: return SD_FAIL(SD_ERR_ARG, "%s (mma): %s", what, buf);
    }
    return SD_OK;
}

static int sdc_gqa_args(const char *what, const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t T, int64_t NH,
                        int64_t KVH, int64_t HS) {
    if (!c || !sdc_att_impl_ok(impl)) return SD_FAIL(SD_ERR_ARG, "%s: no context, or impl %d", what, (int)impl);
    if (!sdc_att_grouped_ok(B, T, NH, KVH, HS))
        return SD_FAIL(SD_ERR_ARG, "%s: B=%lld T=%lld NH=%lld KVH=%lld HS=%lld (want NH a multiple of KVH)", what,
                       (long long)B, (long long)T, (long long)NH, (long long)KVH, (long long)HS);
    return SD_OK;
}

extern "C" int sdc_grouped_attention_bf16(const sdc_ctx *c, sdc_attn impl, uint64_t out, uint64_t lse,
                                          uint64_t qkv, int64_t B, int64_t T, int64_t NH, int64_t KVH, int64_t HS) {
    static const char what[] = "sdc_grouped_attention_bf16";
    SD_TRY(sdc_gqa_args(what, c, impl, B, T, NH, KVH, HS));
    const int b = (int)B, t = (int)T, nh = (int)NH, kvh = (int)KVH, hs = (int)HS;
    if (!out || !lse || !qkv || out % 16 || qkv % 16 || HS % 8)
        return SD_FAIL(SD_ERR_ARG, "%s: NULL or unaligned pointer, or a head size that is not a multiple of 8", what);
    SD_TRY(sdc_use_device(c->device));
    cudaStream_t s = (cudaStream_t)(uintptr_t)c->stream;
    SD_TRY(sdc_gqa_impl(what, &impl, b, t, nh, kvh, hs, s));
    const sdc_att_io io = sdc_gqa_io(qkv, 0, nh, kvh, hs);
    void *o = (void *)(uintptr_t)out;
    float *l = (float *)(uintptr_t)lse;
    if (impl == SDC_ATTN_CUDNN) return sdc_att_cudnn_forward(what, o, l, io, b, t, hs, s);
    if (impl == SDC_ATTN_MMA) return sdc_am_forward_io(o, l, io, b, t, s);
    return sdc_att_forward_io(o, l, io, b, t, hs, s);
}

extern "C" int sdc_grouped_attention_backward_bf16(const sdc_ctx *c, sdc_attn impl, uint64_t dqkv, uint64_t dout,
                                                   uint64_t qkv, uint64_t out, uint64_t lse, int64_t B, int64_t T,
                                                   int64_t NH, int64_t KVH, int64_t HS, uint64_t scratch) {
    static const char what[] = "sdc_grouped_attention_backward_bf16";
    SD_TRY(sdc_gqa_args(what, c, impl, B, T, NH, KVH, HS));
    const int b = (int)B, t = (int)T, nh = (int)NH, kvh = (int)KVH, hs = (int)HS;
    const uint64_t ptrs[] = {dqkv, dout, qkv, out};
    for (uint64_t p : ptrs)
        if (!p || p % 16 || HS % 8)
            return SD_FAIL(SD_ERR_ARG, "%s: NULL or unaligned pointer, or a head size that is not a multiple of 8", what);
    if (!lse || !scratch) return SD_FAIL(SD_ERR_ARG, "%s: NULL lse or scratch", what);
    SD_TRY(sdc_use_device(c->device));
    cudaStream_t s = (cudaStream_t)(uintptr_t)c->stream;
    SD_TRY(sdc_gqa_impl(what, &impl, b, t, nh, kvh, hs, s));
    const sdc_att_io io = sdc_gqa_io(qkv, dqkv, nh, kvh, hs);
    const void *dy = (const void *)(uintptr_t)dout, *o = (const void *)(uintptr_t)out;
    const float *l = (const float *)(uintptr_t)lse;
    void *sc = (void *)(uintptr_t)scratch;
    if (impl == SDC_ATTN_CUDNN) return sdc_att_cudnn_backward(what, io, dy, o, l, b, t, hs, sc, s);
    if (impl == SDC_ATTN_MMA) return sdc_am_backward_io(io, dy, o, l, b, t, sc, s);
    return sdc_att_backward_io(io, dy, o, l, b, t, hs, sc, s);
}

/* impl resolved at a grouped shape for the queries below (sizes checked, the
 * context's device current), or -1 where impl's kernels do not take it. */
static int sdc_gqa_query_impl(const sdc_ctx *c, sdc_attn impl, int b, int t, int nh, int kvh, int hs) {
    char buf[160];
    if (sdc_gqa_resolve(&impl, b, t, nh, kvh, hs, (cudaStream_t)(uintptr_t)c->stream, buf, sizeof buf) != 0) return -1;
    if (impl == SDC_ATTN_CUDNN)
        return sdc_att_cudnn_supported(sdc_gqa_io(0, 0, nh, kvh, hs), b, t, hs) ? SDC_ATTN_CUDNN : -1;
    return impl;
}

extern "C" int sdc_grouped_attention_backward_bf16_scratch_bytes(const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t T,
                                                                 int64_t NH, int64_t KVH, int64_t HS, int64_t *bytes) {
    static const char what[] = "sdc_grouped_attention_backward_bf16_scratch_bytes";
    if (!bytes) return SD_FAIL(SD_ERR_ARG, "%s: no result", what);
    *bytes = 0;
    if (!c || !sdc_att_impl_ok(impl)) return SD_FAIL(SD_ERR_ARG, "%s: no context, or impl %d", what, (int)impl);
    if (!sdc_att_grouped_ok(B, T, NH, KVH, HS)) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    const int b = (int)B, t = (int)T, nh = (int)NH, kvh = (int)KVH, hs = (int)HS;
    switch (sdc_gqa_query_impl(c, impl, b, t, nh, kvh, hs)) {
    case SDC_ATTN_CUDNN: /* its workspace, where its plans build */
        *bytes = (int64_t)sdc_att_cudnn_scratch_bytes(sdc_gqa_io(0, 0, nh, kvh, hs), b, t, hs);
        break;
    case SDC_ATTN_MMA: /* D and the dS^T tiles */
        *bytes = (int64_t)sdc_am_backward_scratch_bytes(b, t, nh);
        break;
    case SDC_ATTN_WMMA: /* D: one float a row */
        *bytes = (int64_t)B * NH * T * (int64_t)sizeof(float);
        break;
    }
    return SD_OK;
}

extern "C" int sdc_grouped_attention_bf16_supported(const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t T, int64_t NH,
                                                    int64_t KVH, int64_t HS, sdc_flag *supported) {
    static const char what[] = "sdc_grouped_attention_bf16_supported";
    if (!supported) return SD_FAIL(SD_ERR_ARG, "%s: no result", what);
    *supported = 0;
    if (!c || !sdc_att_impl_ok(impl)) return SD_FAIL(SD_ERR_ARG, "%s: no context, or impl %d", what, (int)impl);
    if (!sdc_att_grouped_ok(B, T, NH, KVH, HS)) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    *supported = sdc_gqa_query_impl(c, impl, (int)B, (int)T, (int)NH, (int)KVH, (int)HS) >= 0 ? 1 : 0;
    return SD_OK;
}
