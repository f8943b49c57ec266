/*
 * symddp_gpt.h: the C ABI of the GPT-2 kernels of libsymddp_cuda.so (issue 20):
 * the operations one bf16 training step of a GPT-2 needs, one file per
 * operation (cuda/sd_gpt_*.cu: forward kernel, backward kernel and launcher
 * together), checked against CPU references by cuda/gptcheck/check.cu.
 *
 * Conventions:
 *   - plain C types: bf16 tensors are void * (device __nv_bfloat16), fp32
 *     tensors float *, token ids int32_t *; streams are cudaStream_t as void *;
 *   - every launcher returns SDG_OK (0) or an SDG_ERR_* code and leaves a
 *     message with file:line on the calling thread for sdg_last_error();
 *   - launchers only enqueue on the stream (no allocation, no sync), so a step
 *     built from them can be captured in a CUDA graph; scratch memory is the
 *     caller's (the *_scratch_bytes functions say how much);
 *   - every reduction has a fixed order of addition that depends only on the
 *     shapes, never float atomics: every run gives the same bits;
 *   - shapes: B batch, T sequence length, C channels, NH heads, V vocabulary,
 *     Vp padded vocabulary (row length of the logits), N = B*T rows;
 *   - bf16 pointers must be 16-byte aligned and C a multiple of 8 (16-byte
 *     vector loads of 8 bf16).
 */
#ifndef SYMDDP_GPT_H
#define SYMDDP_GPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SDG_ABI_VERSION 6

enum { SDG_OK = 0, SDG_ERR_ARG = 1, SDG_ERR_CUDA = 2, SDG_ERR_BLAS = 3 };

int sdg_abi_version(void);
/* The message of the last failure on the calling thread ("" when none). */
const char *sdg_last_error(void);

/* ---- layernorm (sd_gpt_layernorm.cu), eps 1e-5 ----
 * forward: inp, out (N,C) bf16; weight, bias (C) bf16 (the bf16 copy of the
 * parameters that sdg_adamw writes); mean, rstd (N) fp32, saved for backward
 * (either may be NULL for inference).
 * backward: dinp (N,C) bf16 is ADDED to (the residual stream's gradient);
 * dweight, dbias (C) fp32 are ADDED to; scratch: sdg_layernorm_backward_scratch_bytes. */
int sdg_layernorm_forward(void *out, float *mean, float *rstd, const void *inp, const void *weight,
                          const void *bias, int N, int C, void *stream);
size_t sdg_layernorm_backward_scratch_bytes(int N, int C);
int sdg_layernorm_backward(void *dinp, float *dweight, float *dbias, const void *dout, const void *inp,
                           const void *weight, const float *mean, const float *rstd, int N, int C, void *scratch,
                           void *stream);

/* ---- GELU, tanh approximation (sd_gpt_gelu.cu), n elements ----
 * backward: dinp = dout * gelu'(inp); dinp may be dout (in place). */
int sdg_gelu_forward(void *out, const void *inp, int64_t n, void *stream);
int sdg_gelu_backward(void *dinp, const void *inp, const void *dout, int64_t n, void *stream);

/* ---- token + position embedding (sd_gpt_embed.cu) ----
 * forward: out (B,T,C) bf16 = wte[tokens] + wpe[t]; wte (V,C), wpe (T',C), T' >= T, bf16;
 * wpe NULL: no positions, out = wte[tokens] (and dwpe NULL in the backward).
 * backward: dwte (V,C) fp32 and dwpe (T',C) fp32 are ADDED to; tokens must lie in
 * [0,V). dwte rows are summed in increasing position order (positions sorted by
 * token with a stable radix sort, then one pass per token); dwpe over b in order. */
int sdg_embed_forward(void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C,
                      void *stream);
size_t sdg_embed_backward_scratch_bytes(int B, int T, int V);
int sdg_embed_backward(float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T, int C,
                       int V, void *scratch, size_t scratch_bytes, void *stream);

/* ---- causal self-attention (sd_gpt_attention.cu) ----
 * qkv (B,T,3C) bf16: head h's q at columns [h*hs,(h+1)*hs), k at C + that, v at 2C + that;
 * out (B,T,C) bf16; lse (B,NH,T) fp32, the natural-log logsumexp of each row of
 * scaled scores (1/sqrt(hs)). hs = C/NH must be 32 or 64; T a multiple of 64.
 * backward: dqkv (B,T,3C) bf16 is WRITTEN (not added to); scratch:
 * sdg_attention_backward_scratch_bytes. */
int sdg_attention_forward(void *out, float *lse, const void *qkv, int B, int T, int C, int NH, void *stream);
size_t sdg_attention_backward_scratch_bytes(int B, int T, int C, int NH);
int sdg_attention_backward(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse, int B,
                           int T, int C, int NH, void *scratch, void *stream);
/* Two implementations side by side; the two above take the mma one where it
 * applies (sdg_attention_mma_supported), else the wmma one. Same arguments.
 *   wmma (sd_gpt_attention.cu): nvcuda::wmma 16x16x16 fragments through shared
 *     memory; hs 32 or 64, T a multiple of 64. The reference and fallback.
 *   mma (sd_gpt_attention_mma.cu): mma.sync m16n8k16 bf16 with the scores and
 *     the online softmax in registers, ldmatrix and cp.async double buffering;
 *     hs 64, T a multiple of 128; the backward keeps dS^T in the scratch
 *     (B*NH*T*(T+64) bytes) for its dQ kernel. */
int sdg_attention_mma_supported(int T, int C, int NH);
int sdg_attention_forward_wmma(void *out, float *lse, const void *qkv, int B, int T, int C, int NH, void *stream);
int sdg_attention_backward_wmma(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                                int B, int T, int C, int NH, void *scratch, void *stream);
int sdg_attention_forward_mma(void *out, float *lse, const void *qkv, int B, int T, int C, int NH, void *stream);
int sdg_attention_backward_mma(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                               int B, int T, int C, int NH, void *scratch, void *stream);
/*   cudnn (sd_gpt_attention_cudnn.cu): cuDNN's fused attention engines through
 *     its backend graph API, where the library was built with cuDNN; hs a
 *     multiple of 8 up to 128. Plans are built per shape on first use (by
 *     sdg_attention_cudnn_supported or the scratch query, never while a stream
 *     is captured); the scratch holds its workspace
 *     (sdg_attention_cudnn_scratch_bytes). The entry points above take it
 *     where its plans build, unless SYMDDP_ATTENTION=own (SYMDDP_ATTENTION=cudnn:
 *     always, failing with the reason where it cannot). */
int sdg_attention_cudnn_supported(int B, int T, int C, int NH);
size_t sdg_attention_cudnn_scratch_bytes(int B, int T, int C, int NH);
int sdg_attention_forward_cudnn(void *out, float *lse, const void *qkv, int B, int T, int C, int NH, void *stream);
int sdg_attention_backward_cudnn(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                                 int B, int T, int C, int NH, void *scratch, void *stream);

/* ---- grouped-query causal self-attention (sd_gpt_attention.cu) ----
 * The same flash attention kernels (mma at hs 64 and T a multiple of 128,
 * wmma otherwise; never cuDNN's) on three tensors: q (B,T,NH*HS), k and v
 * (B,T,KVH*HS) bf16, NH a multiple of KVH; query head h reads key/value head
 * h/(NH/KVH) (Hugging Face's repeat_kv order), where it lies (no copy).
 * out (B,T,NH*HS) bf16; lse (B,NH,T) fp32. HS 32 or 64, T a multiple of 64.
 * backward: dq, dk, dv (q's, k's, v's shapes) bf16 WRITTEN; a key/value
 * head's dk and dv sum its group's query heads in order, in the kernel's
 * registers (no atomics): the bits repeat. KVH == NH is multi-head attention
 * with separate q, k, v. scratch: sdg_gqa_backward_scratch_bytes. */
int sdg_gqa_forward(void *out, float *lse, const void *q, const void *k, const void *v, int B, int T, int NH, int KVH,
                    int HS, void *stream);
size_t sdg_gqa_backward_scratch_bytes(int B, int T, int NH, int KVH, int HS);
int sdg_gqa_backward(void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k, const void *v,
                     const void *out, const float *lse, int B, int T, int NH, int KVH, int HS, void *scratch,
                     void *stream);

/* ---- fused softmax cross-entropy (sd_gpt_classifier.cu) ----
 * logits (N,Vp) bf16, of which columns [0,V) are real; targets (N) int32, -1: row ignored.
 * losses (N) fp32: logsumexp - logit[target] (0 for ignored rows). With write_grad,
 * the logits are overwritten by their gradient (softmax - onehot) * dscale as
 * bf16 (0 in padded columns and ignored rows). Vp must be a multiple of 8. */
int sdg_classifier(float *losses, void *logits, const int32_t *targets, int N, int V, int Vp, float dscale,
                   int write_grad, void *stream);

/* ---- loss statistics (sd_gpt_classifier.cu) ----
 * stats (3) fp32: stats[0] += the sum of losses (N) fp32, stats[2] += the number
 * of targets (N) that are not -1; stats[1] is left as it is. One block, sums in
 * double in a fixed order. */
int sdg_loss_stats(float *stats, const float *losses, const int32_t *targets, int N, void *stream);

/* ---- fp32 to bf16 (sd_gpt_cast.cu) ----
 * out (n bf16) = inp (n fp32) rounded to nearest even (the bf16 copy of the
 * master weights that the GEMMs read). */
int sdg_cast_bf16(void *out, const float *inp, int64_t n, void *stream);

/* ---- AdamW (sd_gpt_adamw.cu) ----
 * params, grads, m, v: n fp32; params_bf16 (n bf16, or NULL) receives the updated
 * params rounded. decay: one byte per chunk of chunk elements (element i decays
 * when decay[i / chunk] != 0); NULL: every element decays. hyper: DEVICE memory,
 * read by the kernel (so a graph replays with new values written there). The
 * gradient is multiplied by grad_scale first (1 / accumulation steps, clipping).
 * PyTorch's AdamW: p -= lr*wd*p; m,v moments; p -= lr/bc1 * m / (sqrt(v/bc2) + eps). */
typedef struct {
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    int32_t step; /* 1 for the first update */
    int32_t pad;
} sdg_adamw_hyper;
int sdg_adamw(float *params, void *params_bf16, const float *grads, float *m, float *v, const uint8_t *decay,
              int64_t chunk, int64_t n, const sdg_adamw_hyper *hyper, void *stream);

/* ---- Linear bias gradient (sd_gpt_bias.cu) ----
 * dbias (OC) fp32 = the column sums of dout (N,OC) bf16 (OC a multiple of 8),
 * WRITTEN, deterministically; beside a dW GEMM without the BGRAD_A epilogue,
 * which costs more at GPT-2's shapes than this kernel.
 * scratch: sdg_bias_backward_scratch_bytes. */
size_t sdg_bias_backward_scratch_bytes(int N, int OC);
int sdg_bias_backward(float *dbias, const void *dout, int N, int OC, void *scratch, void *stream);

/* ---- bf16 GEMMs on cuBLASLt (sd_gpt_gemm.cu) ----
 * Row-major C (m,n) = op(A) (m,k) op(B) (k,n) [+ C when accumulate], A and B
 * bf16, fp32 accumulation, C bf16 or fp32 (c_type). trans_a: A is stored (k,m);
 * trans_b: B is stored (n,k) (a Linear's weight (OC,C): y = x W^T is trans_b = 1).
 * batch > 1: strided batches (strides in elements), epilogue NONE only.
 * Epilogues (bias vectors have n entries, one per column of C, type bias_type):
 *   BIAS           C = AB + bias
 *   GELU_BIAS      C = gelu(AB + bias)
 *   GELU_AUX_BIAS  C = gelu(AB + bias), aux (m,n) bf16 = AB + bias (pre-activation)
 *   DGELU          C = (AB) * gelu'(aux), aux the forward's pre-activation
 *   DGELU_BGRAD    as DGELU, and bias = column sums of C (over the m rows)
 *   BGRAD_A        bias (m entries!) = row sums of op(A) over k: with A = dout^T
 *                  (trans_a, dout (tokens,OC)) and B = x, C = dW and bias = db.
 * The bias gradient is written, not added to. The plan (descriptors, layouts
 * and the heuristic's algorithm for workspace_bytes) is made once; sdg_gemm_run
 * sets the pointers and enqueues cublasLtMatmul (so a plan is not for two
 * threads at once). lt is a cublasLtHandle_t. */
enum {
    SDG_EPI_NONE = 0,
    SDG_EPI_BIAS = 1,
    SDG_EPI_GELU_BIAS = 2,
    SDG_EPI_GELU_AUX_BIAS = 3,
    SDG_EPI_DGELU = 4,
    SDG_EPI_DGELU_BGRAD = 5,
    SDG_EPI_BGRAD_A = 6
};
enum { SDG_BF16 = 0, SDG_F32 = 1 };
typedef struct {
    int32_t m, n, k;
    int32_t trans_a, trans_b;
    int32_t batch;                        /* 1: one GEMM */
    int64_t stride_a, stride_b, stride_c; /* elements between batches */
    int32_t c_type;                       /* SDG_BF16 or SDG_F32 */
    int32_t bias_type;                    /* SDG_BF16 or SDG_F32 */
    int32_t epilogue;                     /* SDG_EPI_* */
    int32_t accumulate;                   /* 1: C += op(A) op(B) (beta = 1) */
    int64_t workspace_bytes;              /* what sdg_gemm_run will be given */
} sdg_gemm_desc;
typedef struct sdg_gemm_s sdg_gemm;
/* A cuBLASLt handle for the plans (cublasLtCreate; sdg_lt_destroy frees it). */
typedef struct sdg_lt_s sdg_lt;
int sdg_lt_create(sdg_lt **lt);
void sdg_lt_destroy(sdg_lt *lt);
int sdg_gemm_create(sdg_gemm **plan, void *lt, const sdg_gemm_desc *d);
int sdg_gemm_run(sdg_gemm *plan, void *lt, void *c, const void *a, const void *b, void *bias, void *aux,
                 void *workspace, void *stream);
/* For a plan that accumulates: d = op(A) op(B) [+ bias] + c, c read and d
 * written (of C's shape and type; d may be c), so that a residual add needs
 * no copy of the residual into the output first. */
int sdg_gemm_run_into(sdg_gemm *plan, void *lt, void *d, const void *c, const void *a, const void *b, void *bias,
                      void *aux, void *workspace, void *stream);
void sdg_gemm_destroy(sdg_gemm *plan);
/* Times up to candidates (at most 16) of cuBLASLt's algorithms for the plan
 * (the heuristic's first ones, and split-K variants of them when the first
 * fills less than one wave of the GPU) on the operands given as to
 * sdg_gemm_run, reps runs each after one warm-up, on stream (not while
 * capturing: it waits for the stream), and keeps the fastest in the plan. c is overwritten, and
 * accumulated into again and again when the plan accumulates: pass scratch
 * of C's size when its contents matter. sdg_gemm_tuned_ns is the mean time
 * in nanoseconds of the heuristic's first algorithm (best = 0) or of the
 * kept one (best = 1) in the last tune, 0 before one. */
int sdg_gemm_tune(sdg_gemm *plan, void *lt, void *c, const void *a, const void *b, void *bias, void *aux,
                  void *workspace, void *stream, int candidates, int reps);
int sdg_gemm_tuned_ns(const sdg_gemm *plan, int best);

#ifdef __cplusplus
}
#endif

#endif /* SYMDDP_GPT_H */
