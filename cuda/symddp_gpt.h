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

#define SDG_ABI_VERSION 14

enum { SDG_OK = 0, SDG_ERR_ARG = 1, SDG_ERR_CUDA = 2, SDG_ERR_BLAS = 3 };

int sdg_abi_version(void);
/* The message of the last failure on the calling thread ("" when none). */
const char *sdg_last_error(void);

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

#ifdef __cplusplus
}
#endif

#endif /* SYMDDP_GPT_H */
