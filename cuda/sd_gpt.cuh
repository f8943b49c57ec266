/*
 * sd_gpt.cuh: what the GPT kernels (sd_gpt_*.cu) share: the error helpers of
 * symddp_gpt.h's convention and the attention's choices; the bf16 vectors and
 * warp sums are sd_bf16.cuh's.
 * Independent of NVSHMEM and of sd_internal.h.
 */
#ifndef SD_GPT_CUH
#define SD_GPT_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "sd_bf16.cuh"
#include "symddp_gpt.h"

/* Records a formatted message with file:line for sdg_last_error(); returns code. */
int sdg_fail(int code, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define SDG_FAIL(code, ...) sdg_fail((code), __FILE__, __LINE__, __VA_ARGS__)

/* Returns SDG_ERR_CUDA from the enclosing function when a CUDA call fails. */
#define SDG_CUDA(call)                                                                              \
    do {                                                                                            \
        cudaError_t sdg_e_ = (call);                                                                \
        if (sdg_e_ != cudaSuccess)                                                                  \
            return sdg_fail(SDG_ERR_CUDA, __FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(sdg_e_)); \
    } while (0)

/* After a launch: the launch's configuration error, if any. */
#define SDG_LAUNCHED() SDG_CUDA(cudaGetLastError())

/* Scratch of sdg_attention_backward_mma (sd_gpt_attention_mma.cu): D and the
 * bf16 dS^T tiles; sdg_attention_backward_scratch_bytes gives it where the
 * mma kernels may run. */
size_t sdg_am_backward_scratch_bytes(int B, int T, int NH);

/*
 * Where attention's operands lie (sd_gpt_attention.cu, sd_gpt_attention_mma.cu):
 * query head h of row r (= b*T + t) at q + r*ldq + h*HS, its key and value at
 * k + r*ldkv + (h/grp)*HS and v + r*ldkv + (h/grp)*HS; their gradients dq,
 * dk, dv at the same offsets with the same strides. GPT-2's packed qkv
 * (B,T,3C) is q = qkv, k = qkv + C, v = qkv + 2C, every stride 3C, grp 1;
 * grouped-query attention (sdg_gqa_*) is three tensors, ldq = NH*HS,
 * ldkv = KVH*HS, grp = NH/KVH query heads a key/value head (repeat_kv's
 * order). out and dout are (B,T,NH*HS) either way.
 */
struct sdg_att_io {
    const bf16 *q, *k, *v;
    bf16 *dq, *dk, *dv;
    int ldq, ldkv; /* elements between rows */
    int NH, grp;   /* query heads; query heads per key/value head */
};

/* GPT-2's packed qkv (and dqkv, which may be NULL for the forward) as an io. */
static inline sdg_att_io sdg_att_packed(const void *qkv, void *dqkv, int C, int NH) {
    const bf16 *x = (const bf16 *)qkv;
    bf16 *d = (bf16 *)dqkv;
    sdg_att_io io = {x, x + C, x + 2 * C, d, d ? d + C : NULL, d ? d + 2 * C : NULL, 3 * C, 3 * C, NH, 1};
    return io;
}

/* The mma kernels on an io (sd_gpt_attention_mma.cu), and the wmma ones
 * (sd_gpt_attention.cu); arguments checked by the caller. */
int sdg_am_forward_io(void *out, float *lse, const sdg_att_io &io, int B, int T, void *stream);
int sdg_am_backward_io(const sdg_att_io &io, const void *dout, const void *out, const float *lse, int B, int T,
                       void *scratch, void *stream);
int sdg_att_forward_io(void *out, float *lse, const sdg_att_io &io, int B, int T, int HS, void *stream);
int sdg_att_backward_io(const sdg_att_io &io, const void *dout, const void *out, const float *lse, int B, int T,
                        int HS, void *scratch, void *stream);

/* Which attention the entry points take (sd_gpt_attention_cudnn.cu):
 * SYMDDP_ATTENTION=auto (or unset): cuDNN's where its plans build, else ours;
 * cudnn: cuDNN's or an error saying why not; own (or anything else): ours.
 * sdg_attention_use_cudnn builds the plans on first use unless the stream is
 * being captured. */
enum { SDG_ATT_AUTO = 0, SDG_ATT_CUDNN = 1, SDG_ATT_OWN = 2 };
int sdg_attention_mode(void);
int sdg_attention_use_cudnn(int B, int T, int C, int NH, void *stream);

/* The bf16 helpers under their GPT names, until the last sd_gpt_*.cu has
 * joined its operation's sd_compute_*.cu. */
#define sdg_aligned16 sdb_aligned16
#define sdg_unpack8 sdb_unpack8
#define sdg_load8 sdb_load8
#define sdg_store8 sdb_store8
#define sdg_warp_sum sdb_warp_sum
#define sdg_warp_max sdb_warp_max

#endif /* SD_GPT_CUH */
