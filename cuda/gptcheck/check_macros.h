// Fail-fast checks shared by the GPT kernel check (check.cu) and the step
// harness (step.cu): a CUDA error exits 100, an sdc_* error 101, printing
// file:line, the call and the message. Both link build/libsymddp_cuda.so
// (cuda/build.sh) and run the compute ABI's entry points on a context
// (sdc_ctx) over their own stream.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include "symddp_compute.h"
#include "symddp_cuda.h"

#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(100);                                                                           \
        }                                                                                        \
    } while (0)

#define SC(call)                                                                                 \
    do {                                                                                         \
        int rc_ = (call);                                                                        \
        if (rc_ != SD_OK) {                                                                      \
            fprintf(stderr, "%s:%d: %s: rc %d: %s\n", __FILE__, __LINE__, #call, rc_, sd_last_error()); \
            exit(101);                                                                           \
        }                                                                                        \
    } while (0)

/* A device pointer as the compute ABI's uint64_t. */
static inline uint64_t dptr(const void *p) { return (uint64_t)(uintptr_t)p; }

/* sdc_layer_norm_backward's scratch for bf16 rows. */
static inline size_t ln_scratch_bytes(int64_t N, int64_t C) {
    int64_t b = 0;
    SC(sdc_layer_norm_backward_scratch_bytes(SDC_BF16, N, C, &b));
    return (size_t)b;
}

/* sdc_bias_act_backward's scratch for a bf16 bias gradient. */
static inline size_t bias_scratch_bytes(int64_t N, int64_t OC) {
    int64_t b = 0;
    SC(sdc_bias_act_backward_scratch_bytes(SDC_BF16, N, OC, &b));
    return (size_t)b;
}

/* sdc_embed_backward_bf16's scratch. */
static inline size_t embed_scratch_bytes(int64_t B, int64_t T, int64_t V) {
    int64_t b = 0;
    SC(sdc_embed_backward_bf16_scratch_bytes(B, T, V, &b));
    return (size_t)b;
}

/* sdc_bf16_gemm_tuned's time of the heuristic's (best 0) or the kept (1) algorithm. */
static inline int64_t tuned_ns(sdc_handle p, int best) {
    int64_t ns = 0;
    SC(sdc_bf16_gemm_tuned(p, best, &ns));
    return ns;
}

/* sdc_attention_backward_bf16's scratch for impl at a shape (0: impl cannot run it). */
static inline size_t att_scratch_bytes(const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t T, int64_t C, int64_t NH) {
    int64_t b = 0;
    SC(sdc_attention_backward_bf16_scratch_bytes(c, impl, B, T, C, NH, &b));
    return (size_t)b;
}

/* Whether impl's attention kernels take the shape (SDC_ATTN_CUDNN: its plans build). */
static inline bool att_supported(const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t T, int64_t C, int64_t NH) {
    sdc_flag ok = 0;
    SC(sdc_attention_bf16_supported(c, impl, B, T, C, NH, &ok));
    return ok != 0;
}
