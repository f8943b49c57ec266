/*
 * fake_symddp_gpt.c: a stand-in for the GPT kernels of libsymddp_cuda.so
 * (cuda/symddp_gpt.h), linked into the fake library with fake_symddp_cuda.c.
 * "Device" memory is host memory (what the fake's sd_dev_alloc returns).
 *
 * The launchers check a few of the header's rules (shapes, NULL plans, the
 * handle a plan was made with) and fail with SDG_ERR_ARG and a "fake: ..."
 * message for sdg_last_error(). A stream that is not NULL is a log, not a
 * cudaStream_t: FAKE_SDG_LOG_CAP bytes of device memory holding a
 * NUL-terminated string, to which every launcher appends one line with its
 * name and arguments ("sdg_gelu_forward out=0x.. inp=0x.. n=8"), so a test
 * sees what arrived. sdg_adamw computes its update for real (fp32, on the
 * hyperparameters it reads from "device" memory); the other launchers only
 * log. A launcher that only logs is not written here: fake_gpt_gen.c, which
 * go generate ./internal/cudalib writes from the header, has a weak default
 * of every launcher (log, SDG_OK) that a definition here replaces. The
 * *_scratch_bytes functions return made-up sizes of their arguments (see
 * each).
 *
 * Environment knobs, read when called:
 *   FAKE_SDG_ABI=n     sdg_abi_version returns n
 */
#include <math.h>
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

static int check_c(int C) {
    if (C <= 0 || C % 8) return gfail(SDG_ERR_ARG, "C=%d is not a positive multiple of 8", C);
    return SDG_OK;
}

int sdg_layernorm_forward(void *out, float *mean, float *rstd, const void *inp, const void *weight,
                          const void *bias, int N, int C, void *stream) {
    if (check_c(C)) return SDG_ERR_ARG;
    fake_sdg_log(stream, "sdg_layernorm_forward out=0x%lx mean=0x%lx rstd=0x%lx inp=0x%lx weight=0x%lx bias=0x%lx N=%d C=%d",
         P(out), P(mean), P(rstd), P(inp), P(weight), P(bias), N, C);
    return SDG_OK;
}

/* Made up: one fp32 pair per channel per 32 rows. */
size_t sdg_layernorm_backward_scratch_bytes(int N, int C) { return (size_t)((N + 31) / 32) * (size_t)C * 8; }

/* Made up: keys and values of a radix sort, and one count per token. */
size_t sdg_embed_backward_scratch_bytes(int B, int T, int V) { return (size_t)B * T * 16 + (size_t)V * 4; }

int sdg_embed_backward(float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T, int C,
                       int V, void *scratch, size_t scratch_bytes, void *stream) {
    if (check_c(C)) return SDG_ERR_ARG;
    size_t need = sdg_embed_backward_scratch_bytes(B, T, V);
    if (scratch_bytes < need) return gfail(SDG_ERR_ARG, "scratch of %zu bytes, need %zu", scratch_bytes, need);
    fake_sdg_log(stream, "sdg_embed_backward dwte=0x%lx dwpe=0x%lx dout=0x%lx tokens=0x%lx B=%d T=%d C=%d V=%d scratch=0x%lx/%zu",
         P(dwte), P(dwpe), P(dout), P(tokens), B, T, C, V, P(scratch), scratch_bytes);
    return SDG_OK;
}

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

int sdg_adamw(float *params, void *params_bf16, const float *grads, float *m, float *v, const uint8_t *decay,
              int64_t chunk, int64_t n, const sdg_adamw_hyper *hyper, void *stream) {
    if (!params || !grads || !m || !v || !hyper) return gfail(SDG_ERR_ARG, "NULL tensor or hyperparameters");
    if (decay && chunk <= 0) return gfail(SDG_ERR_ARG, "chunk=%lld with a decay mask", (long long)chunk);
    const sdg_adamw_hyper h = *hyper;
    if (h.step < 1) return gfail(SDG_ERR_ARG, "step %d", h.step);
    float bc1 = 1, bc2 = 1;
    for (int s = 0; s < h.step; s++) bc1 *= h.beta1, bc2 *= h.beta2;
    bc1 = 1 - bc1, bc2 = 1 - bc2;
    for (int64_t i = 0; i < n; i++) {
        float g = grads[i] * h.grad_scale, p = params[i];
        if (!decay || decay[i / chunk]) p -= h.lr * h.weight_decay * p;
        m[i] = h.beta1 * m[i] + (1 - h.beta1) * g;
        v[i] = h.beta2 * v[i] + (1 - h.beta2) * g * g;
        p -= h.lr / bc1 * m[i] / (sqrtf(v[i] / bc2) + h.eps);
        params[i] = p;
        if (params_bf16) {
            uint32_t u;
            memcpy(&u, &p, 4);
            u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
            ((uint16_t *)params_bf16)[i] = (uint16_t)(u >> 16);
        }
    }
    fake_sdg_log(stream, "sdg_adamw params=0x%lx params_bf16=0x%lx grads=0x%lx m=0x%lx v=0x%lx decay=0x%lx chunk=%lld n=%lld hyper=0x%lx",
         P(params), P(params_bf16), P(grads), P(m), P(v), P(decay), (long long)chunk, (long long)n, P(hyper));
    return SDG_OK;
}

/* Made up: one fp32 per column per 64 rows. */
size_t sdg_bias_backward_scratch_bytes(int N, int OC) { return (size_t)((N + 63) / 64) * (size_t)OC * 4; }
size_t sdg_gqa_backward_scratch_bytes(int B, int T, int NH, int KVH, int HS) {
    return (size_t)B * NH * T * 4 + (size_t)KVH * HS;
}

/* A fake cuBLASLt handle: a distinct address the plans remember. */
static char fake_lt_handles[4];
static int fake_lt_next;

int sdg_lt_create(sdg_lt **lt) {
    if (!lt) return gfail(SDG_ERR_ARG, "NULL");
    *lt = (sdg_lt *)&fake_lt_handles[fake_lt_next++ & 3];
    return SDG_OK;
}

void sdg_lt_destroy(sdg_lt *lt) { (void)lt; }

struct sdg_gemm_s {
    sdg_gemm_desc d;
    void *lt;
};

int sdg_gemm_create(sdg_gemm **plan, void *lt, const sdg_gemm_desc *d) {
    if (!plan || !d) return gfail(SDG_ERR_ARG, "NULL plan or descriptor");
    *plan = NULL;
    if (d->epilogue < SDG_EPI_NONE || d->epilogue > SDG_EPI_BGRAD_A) return gfail(SDG_ERR_ARG, "epilogue %d", d->epilogue);
    if (d->batch > 1 && d->epilogue != SDG_EPI_NONE)
        return gfail(SDG_ERR_ARG, "batch %d with epilogue %d", d->batch, d->epilogue);
    if (d->c_type != SDG_BF16 && d->c_type != SDG_F32) return gfail(SDG_ERR_ARG, "c_type %d", d->c_type);
    sdg_gemm *p = (sdg_gemm *)calloc(1, sizeof *p);
    if (!p) return gfail(SDG_ERR_CUDA, "calloc");
    p->d = *d;
    p->lt = lt;
    *plan = p;
    return SDG_OK;
}

int sdg_gemm_run(sdg_gemm *plan, void *lt, void *c, const void *a, const void *b, void *bias, void *aux,
                 void *workspace, void *stream) {
    if (!plan) return gfail(SDG_ERR_ARG, "NULL plan");
    if (lt != plan->lt) return gfail(SDG_ERR_ARG, "plan made with cuBLASLt handle 0x%lx, run with 0x%lx", P(plan->lt), P(lt));
    const sdg_gemm_desc *d = &plan->d;
    if (d->workspace_bytes > 0 && !workspace)
        return gfail(SDG_ERR_ARG, "the plan wants %lld bytes of workspace, got none", (long long)d->workspace_bytes);
    fake_sdg_log(stream,
         "sdg_gemm_run m=%d n=%d k=%d trans_a=%d trans_b=%d batch=%d strides=%lld,%lld,%lld c_type=%d bias_type=%d "
         "epilogue=%d accumulate=%d workspace_bytes=%lld lt=0x%lx c=0x%lx a=0x%lx b=0x%lx bias=0x%lx aux=0x%lx "
         "workspace=0x%lx",
         d->m, d->n, d->k, d->trans_a, d->trans_b, d->batch, (long long)d->stride_a, (long long)d->stride_b,
         (long long)d->stride_c, d->c_type, d->bias_type, d->epilogue, d->accumulate, (long long)d->workspace_bytes,
         P(lt), P(c), P(a), P(b), P(bias), P(aux), P(workspace));
    return SDG_OK;
}

int sdg_gemm_run_into(sdg_gemm *plan, void *lt, void *d, const void *c, const void *a, const void *b, void *bias,
                      void *aux, void *workspace, void *stream) {
    if (!plan) return gfail(SDG_ERR_ARG, "NULL plan");
    if (!plan->d.accumulate) return gfail(SDG_ERR_ARG, "the plan does not accumulate, so it reads no C");
    fake_sdg_log(stream, "sdg_gemm_run_into d=0x%lx c=0x%lx", P(d), P(c));
    return sdg_gemm_run(plan, lt, d, a, b, bias, aux, workspace, stream);
}

void sdg_gemm_destroy(sdg_gemm *plan) { free(plan); }

int sdg_gemm_tune(sdg_gemm *plan, void *lt, void *c, const void *a, const void *b, void *bias, void *aux,
                  void *workspace, void *stream, int candidates, int reps) {
    if (!plan) return gfail(SDG_ERR_ARG, "NULL plan");
    fake_sdg_log(stream, "sdg_gemm_tune candidates=%d reps=%d c=0x%lx", candidates, reps, P(c));
    return sdg_gemm_run(plan, lt, c, a, b, bias, aux, workspace, stream);
}

int sdg_gemm_tuned_ns(const sdg_gemm *plan, int best) { return plan ? (best ? 1000 : 2000) : 0; }
