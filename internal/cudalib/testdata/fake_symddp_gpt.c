/*
 * fake_symddp_gpt.c: a stand-in for the GPT kernels of libsymddp_cuda.so
 * (cuda/symddp_gpt.h), linked into the fake library with fake_symddp_cuda.c.
 * "Device" memory is host memory (what the fake's sd_dev_alloc returns).
 *
 * The launchers check a few of the header's rules (the attention's shapes)
 * and fail with SDG_ERR_ARG and a "fake: ..." message for sdg_last_error().
 * A stream that is not NULL is a log, not a cudaStream_t: FAKE_SDG_LOG_CAP
 * bytes of device memory holding a NUL-terminated string, to which every
 * launcher appends one line with its name and arguments
 * ("sdg_attention_forward/wmma out=0x.. ..."), so a test sees what arrived;
 * the launchers only log. A launcher that only logs is not written here:
 * fake_gpt_gen.c, which go generate ./internal/cudalib writes from the header, has a weak default
 * of every launcher (log, SDG_OK) that a definition here replaces. The
 * *_scratch_bytes functions return made-up sizes of their arguments (see
 * each).
 *
 * Environment knobs, read when called:
 *   FAKE_SDG_ABI=n     sdg_abi_version returns n
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symddp_gpt.h"

#define FAKE_SDG_LOG_CAP 4096

static __thread char sdg_err[512];

static int gfail(int code, const char *fmt, ...) {
    int n = snprintf(sdg_err, sizeof sdg_err, "fake: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sdg_err + n, sizeof sdg_err - (size_t)n, fmt, ap);
    va_end(ap);
    return code;
}

/* fake_sdg_log appends one line to the stream's log (nothing when stream is
 * NULL); fake_gpt_gen.c's default launchers call it too. */
void fake_sdg_log(void *stream, const char *fmt, ...) {
    if (!stream) return;
    char *log = (char *)stream;
    size_t used = strnlen(log, FAKE_SDG_LOG_CAP);
    if (used + 1 >= FAKE_SDG_LOG_CAP) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(log + used, FAKE_SDG_LOG_CAP - used - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    used += (size_t)n < FAKE_SDG_LOG_CAP - used - 1 ? (size_t)n : FAKE_SDG_LOG_CAP - used - 2;
    log[used] = '\n';
    log[used + 1] = 0;
}

#define P(p) ((unsigned long)(uintptr_t)(p))

int sdg_abi_version(void) {
    const char *v = getenv("FAKE_SDG_ABI");
    return v && *v ? atoi(v) : SDG_ABI_VERSION;
}

const char *sdg_last_error(void) { return sdg_err; }

static int check_attention(const char *impl, int T, int C, int NH) {
    if (NH <= 0 || C % NH) return gfail(SDG_ERR_ARG, "%s: C=%d is not a multiple of NH=%d", impl, C, NH);
    int hs = C / NH;
    int mma = impl[0] == 'm';
    if (mma ? hs != 64 : hs != 32 && hs != 64)
        return gfail(SDG_ERR_ARG, "%s: head size %d", impl, hs);
    if (T % (mma ? 128 : 64)) return gfail(SDG_ERR_ARG, "%s: T=%d", impl, T);
    return SDG_OK;
}

int sdg_attention_mma_supported(int T, int C, int NH) { return NH > 0 && C % NH == 0 && C / NH == 64 && T % 128 == 0; }
/* a library built without cuDNN: its launchers come from fake_gpt_gen.c */
int sdg_attention_cudnn_supported(int B, int T, int C, int NH) {
    (void)B, (void)T, (void)C, (void)NH;
    return 0;
}
size_t sdg_attention_cudnn_scratch_bytes(int B, int T, int C, int NH) {
    (void)B, (void)T, (void)C, (void)NH;
    return 0;
}

static int attn_fwd(const char *impl, void *out, float *lse, const void *qkv, int B, int T, int C, int NH,
                    void *stream) {
    if (check_attention(impl, T, C, NH)) return SDG_ERR_ARG;
    fake_sdg_log(stream, "sdg_attention_forward/%s out=0x%lx lse=0x%lx qkv=0x%lx B=%d T=%d C=%d NH=%d", impl, P(out), P(lse),
         P(qkv), B, T, C, NH);
    return SDG_OK;
}

static int attn_bwd(const char *impl, void *dqkv, const void *dout, const void *qkv, const void *out,
                    const float *lse, int B, int T, int C, int NH, void *scratch, void *stream) {
    if (check_attention(impl, T, C, NH)) return SDG_ERR_ARG;
    fake_sdg_log(stream,
         "sdg_attention_backward/%s dqkv=0x%lx dout=0x%lx qkv=0x%lx out=0x%lx lse=0x%lx B=%d T=%d C=%d NH=%d "
         "scratch=0x%lx",
         impl, P(dqkv), P(dout), P(qkv), P(out), P(lse), B, T, C, NH, P(scratch));
    return SDG_OK;
}

int sdg_attention_forward(void *out, float *lse, const void *qkv, int B, int T, int C, int NH, void *stream) {
    return attn_fwd(sdg_attention_mma_supported(T, C, NH) ? "mma" : "wmma", out, lse, qkv, B, T, C, NH, stream);
}

/* Made up: one fp32 per row of every head. */
size_t sdg_attention_backward_scratch_bytes(int B, int T, int C, int NH) {
    (void)C;
    return (size_t)B * NH * T * 4;
}

int sdg_attention_backward(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse, int B,
                           int T, int C, int NH, void *scratch, void *stream) {
    return attn_bwd(sdg_attention_mma_supported(T, C, NH) ? "mma" : "wmma", dqkv, dout, qkv, out, lse, B, T, C, NH,
                    scratch, stream);
}

int sdg_attention_forward_wmma(void *out, float *lse, const void *qkv, int B, int T, int C, int NH, void *stream) {
    return attn_fwd("wmma", out, lse, qkv, B, T, C, NH, stream);
}

int sdg_attention_backward_wmma(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                                int B, int T, int C, int NH, void *scratch, void *stream) {
    return attn_bwd("wmma", dqkv, dout, qkv, out, lse, B, T, C, NH, scratch, stream);
}

int sdg_attention_forward_mma(void *out, float *lse, const void *qkv, int B, int T, int C, int NH, void *stream) {
    return attn_fwd("mma", out, lse, qkv, B, T, C, NH, stream);
}

int sdg_attention_backward_mma(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                               int B, int T, int C, int NH, void *scratch, void *stream) {
    return attn_bwd("mma", dqkv, dout, qkv, out, lse, B, T, C, NH, scratch, stream);
}

size_t sdg_gqa_backward_scratch_bytes(int B, int T, int NH, int KVH, int HS) {
    return (size_t)B * NH * T * 4 + (size_t)KVH * HS;
}
