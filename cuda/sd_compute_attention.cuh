/*
 * sd_compute_attention.cuh: what the bf16 attention's files share
 * (sd_compute_attention.cu's launchers, the kernels of
 * sd_compute_attention_wmma.cu, sd_compute_attention_mma.cu and
 * sd_compute_attention_cudnn.cu): where the operands lie, and each
 * implementation's launcher on arguments the caller has checked.
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "sd_bf16.cuh"
#include "sd_compute.cuh"
#include "symddp_compute.h"

/*
 * Where attention's operands lie: query head h of row r (= b*T + t) at
 * q + r*ldq + h*HS, its key and value at k + r*ldkv + (h/grp)*HS and
 * v + r*ldkv + (h/grp)*HS; their gradients dq, dk, dv at the same offsets
 * with the same strides. GPT-2's packed qkv (B,T,3C) is q = qkv, k = qkv + C,
 * v = qkv + 2C, every stride 3C, grp 1; grouped-query attention
 * (sdc_grouped_attention_bf16) is three tensors, ldq = NH*HS, ldkv = KVH*HS,
 * grp = NH/KVH query heads a key/value head (repeat_kv's order). out and
 * dout are (B,T,NH*HS) either way.
 */
struct sdc_att_io {
    const bf16 *q, *k, *v;
    bf16 *dq, *dk, *dv;
    int ldq, ldkv; /* elements between rows */
    int NH, grp;   /* query heads; query heads per key/value head */
};

/* GPT-2's packed qkv (and dqkv, which may be NULL for the forward) as an io. */
static inline sdc_att_io sdc_att_packed(const void *qkv, void *dqkv, int C, int NH) {
    const bf16 *x = (const bf16 *)qkv;
    bf16 *d = (bf16 *)dqkv;
    sdc_att_io io = {x, x + C, x + 2 * C, d, d ? d + C : NULL, d ? d + 2 * C : NULL, 3 * C, 3 * C, NH, 1};
    return io;
}

/* The wmma kernels on an io (sd_compute_attention_wmma.cu): HS 32 or 64, T a
 * multiple of 64, B*NH at most 65535; the backward's scratch holds D, one
 * float a row (B*NH*T). */
int sdc_att_forward_io(void *out, float *lse, const sdc_att_io &io, int B, int T, int HS, void *stream);
int sdc_att_backward_io(const sdc_att_io &io, const void *dout, const void *out, const float *lse, int B, int T,
                        int HS, void *scratch, void *stream);

/* The mma kernels on an io (sd_compute_attention_mma.cu): where
 * sdc_am_supported (head size 64, T a multiple of 128), B*NH at most 65535;
 * the backward's scratch holds D and the bf16 dS^T tiles
 * (sdc_am_backward_scratch_bytes). */
bool sdc_am_supported(int T, int C, int NH);
size_t sdc_am_backward_scratch_bytes(int B, int T, int NH);
int sdc_am_forward_io(void *out, float *lse, const sdc_att_io &io, int B, int T, void *stream);
int sdc_am_backward_io(const sdc_att_io &io, const void *dout, const void *out, const float *lse, int B, int T,
                       void *scratch, void *stream);

/*
 * cuDNN's fused attention on an io (sd_compute_attention_cudnn.cu): GPT-2's
 * packed qkv or grouped-query attention's three tensors (KVH = NH/grp key
 * and value heads), HS a multiple of 8 up to 128, on the current device.
 * The plans depend on the io's layout (its strides and heads), not its
 * pointers. sdc_att_cudnn_supported and the scratch query build the plans on
 * first use (never while a stream is captured); the launchers fail with the
 * reason where the plans do not build, or where the library was built
 * without cuDNN, naming call.
 */
int sdc_att_cudnn_supported(const sdc_att_io &io, int B, int T, int HS);
size_t sdc_att_cudnn_scratch_bytes(const sdc_att_io &io, int B, int T, int HS);
int sdc_att_cudnn_forward(const char *call, void *out, float *lse, const sdc_att_io &io, int B, int T, int HS,
                          cudaStream_t s);
int sdc_att_cudnn_backward(const char *call, const sdc_att_io &io, const void *dout, const void *out,
                           const float *lse, int B, int T, int HS, void *scratch, cudaStream_t s);

/*
 * What SDC_ATTN_AUTO may take, by SYMDDP_ATTENTION (sdc_att_mode): auto (or
 * unset): cuDNN's where its plans build, else ours; cudnn: cuDNN's or an
 * error saying why not; own (or anything else): ours. sdc_att_use_cudnn
 * says whether SDC_ATTN_AUTO takes cuDNN's at a shape, building the plans on
 * first use unless stream is being captured.
 */
enum { SDC_ATT_MODE_AUTO = 0, SDC_ATT_MODE_CUDNN = 1, SDC_ATT_MODE_OWN = 2 };
int sdc_att_mode(void);
int sdc_att_use_cudnn(const sdc_att_io &io, int B, int T, int HS, cudaStream_t stream);
