/*
 * cuda/gptcheck/step.cu: one whole GPT-2 124M training step from the
 * library's bf16 kernels (symddp_compute.h's sdc_* with SDC_BF16 and the
 * bf16 forms such as sdc_attention_bf16), captured in one CUDA graph and
 * timed (issue 20).
 *
 *   cuda/build.sh
 *   nvcc -O3 -std=c++17 -arch=sm_90 -cudart shared -Icuda cuda/gptcheck/step.cu -Lbuild -lsymddp_cuda \
 *       -Xlinker -rpath=build -lcublasLt -lcublas
 *   build/gptstep [--batch 16,32] [--steps 20] [--timed 20] [--attention auto|mma|wmma]
 *                 [--no-tune] [--bgrad-epilogue] [--breakdown]
 *
 * Model: 12 layers, 12 heads, C=768, T=1024, vocabulary 50257 padded to 50304,
 * the token embedding tied to the head, GELU (tanh), pre-LayerNorm blocks.
 * bf16 activations and bf16 copies of the weights for the GEMMs; fp32 master
 * weights, gradients and AdamW moments (lr 6e-4 constant, betas 0.9/0.95, eps
 * 1e-8, weight decay 0.1 on the matrices and embeddings; no clipping).
 *
 * One step (graph): step counter++, zero the gradients that are ADDED to (LN,
 * wpe), embed, 12 x [ln1, qkv GEMM+bias, attention, attproj GEMM+bias+residual,
 * ln2, fc GEMM+bias+GELU(aux), fcproj GEMM+bias+residual], lnf, lm_head GEMM,
 * fused softmax cross-entropy (dlogits in place, 1/N), mean loss; backward:
 * lm_head dW (written into dwte) and dinp, lnf backward, 12 x [fcproj dW+db,
 * dinp*gelu' (DGELU epilogue), fc dW+db, dinp, ln2 backward (adds to the
 * residual gradient), attproj dW+db, dinp, attention backward, qkv dW+db, dinp,
 * ln1 backward], embedding backward (adds to dwte, dwpe); AdamW over all
 * 124,475,904 parameters with the bf16 copy. The residual adds are GEMMs with
 * beta = 1 that read the residual as C and write the next one (sdc_bf16_gemm_run_into).
 *
 * Data: one fixed synthetic batch, each sequence a walk x' = (17 x + 5) mod 1024
 * from a random start, so the loss must fall from ln(50304) ~ 10.8: the first
 * step runs eagerly (before the capture), --steps in all (default 20) must bring
 * the mean loss at least 1.0 below the first, else the exit status is 1.
 * Then --timed replays (default 20, after 3 warm-ups) give ms/step, tokens/s and
 * MFU = tokens/s * (6 N + 6 L C T) / 989e12 with N the parameters counted once
 * (124,475,904 with the padded vocabulary), and device memory from
 * cudaMemGetInfo before allocating and after the first replay.
 * --breakdown: after the timing, two more steps run eagerly with a CUDA event
 * after every operation; the second one's times are summed per operation
 * (12 layers together) and printed, largest first, beside their sum.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "check_macros.h"

typedef __nv_bfloat16 bf16;

static const int L = 12, C = 768, NH = 12, T = 1024, V = 50257, Vp = 50304;
#define WS_BYTES ((size_t)64 << 20)

/* the attention of the step: SDC_ATTN_AUTO (cuDNN's where its plans build,
 * else mma where it applies, else wmma), or one implementation */
static sdc_attn g_att = SDC_ATTN_AUTO;
static const char *g_att_name = "auto";
/* --no-tune: the heuristic's GEMM algorithms (else each plan's candidates are
 * timed at its first run, outside the capture, as the product does);
 * --bgrad-epilogue: the bias gradients in the dW GEMMs' BGRAD_A epilogue */
static bool g_tune = true, g_bgrad_epilogue = false;
static std::vector<sdc_handle> g_tuned;

/* --breakdown: an event after each operation of an eager step, with its name */
static bool g_breakdown = false, g_marking = false;
struct Mark {
    const char *name;
    cudaEvent_t ev;
};
static std::vector<Mark> g_marks;
static sdc_ctx g_ctx; /* the compute ABI's context over the step's stream */

static void mark(cudaStream_t s, const char *name) {
    if (!g_marking) return;
    cudaEvent_t e;
    CK(cudaEventCreate(&e));
    CK(cudaEventRecord(e, s));
    g_marks.push_back({name, e});
}

/* ---- small kernels of the harness ---- */
static __device__ __forceinline__ uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* p[i] = sd * N(0,1) (sd > 0), or the constant c (sd == 0). */
__global__ void init_kernel(float *p, int64_t n, float sd, float c, uint64_t seed) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (sd == 0.f) {
            p[i] = c;
            continue;
        }
        const uint64_t r = splitmix(seed ^ splitmix((uint64_t)i));
        const float u = ((float)(r >> 40) + 0.5f) * (1.f / 16777216.f);
        const float v = (float)((r >> 16) & 0xffffff) * (1.f / 16777216.f);
        p[i] = sd * sqrtf(-2.f * logf(u)) * cospif(2.f * v);
    }
}

__global__ void to_bf16_kernel(bf16 *o, const float *p, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        o[i] = __float2bfloat16(p[i]);
}

/* *out = mean of losses[0..n), one block of 1024 threads, fixed order. */
__global__ void __launch_bounds__(1024) mean_kernel(float *out, const float *losses, int n) {
    __shared__ float sm[1024];
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += 1024) s += losses[i];
    sm[threadIdx.x] = s;
    __syncthreads();
    for (int w = 512; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sm[threadIdx.x] += sm[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = sm[0] / (float)n;
}

__global__ void step_inc_kernel(sdc_adamw_hyper *h) { h->step += 1; }

/* ---- parameters ---- */
enum { P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_APW, P_APB, P_LN2W, P_LN2B, P_FCW, P_FCB, P_FPW, P_FPB,
       P_LNFW, P_LNFB, P_NUM };

struct Params {
    int64_t size[P_NUM], off[P_NUM], total;
    Params() {
        const int64_t s[P_NUM] = {(int64_t)Vp * C, (int64_t)T * C, (int64_t)L * C, (int64_t)L * C,
                                  (int64_t)L * 3 * C * C, (int64_t)L * 3 * C, (int64_t)L * C * C, (int64_t)L * C,
                                  (int64_t)L * C, (int64_t)L * C, (int64_t)L * 4 * C * C, (int64_t)L * 4 * C,
                                  (int64_t)L * C * 4 * C, (int64_t)L * C, C, C};
        total = 0;
        for (int i = 0; i < P_NUM; i++) {
            size[i] = s[i];
            off[i] = total;
            total += s[i];
        }
    }
};

static void *dmalloc(size_t bytes) {
    void *p = nullptr;
    CK(cudaMalloc(&p, bytes ? bytes : 16));
    return p;
}

struct Gemms {
    sdc_handle qkv, ap, fc, fp, lm;                         /* forward */
    sdc_handle lm_dinp, lm_dw;                                 /* head backward */
    sdc_handle fp_dw, fp_dinp, fc_dw, fc_dinp, ap_dw, ap_dinp, qkv_dw, qkv_dinp;
};

static sdc_handle mkplan(int m, int n, int k, int ta, int tb, int ctype, int btype, int epi,
                        int acc, bool must = true) {
    sdc_bf16_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = m; d.n = n; d.k = k; d.trans_a = ta; d.trans_b = tb; d.batch = 1;
    d.c_type = ctype; d.bias_type = btype; d.epilogue = epi; d.accumulate = acc;
    d.workspace_bytes = (int64_t)WS_BYTES;
    sdc_handle p = 0;
    if (sdc_bf16_gemm_create(&g_ctx, &d, &p) != SD_OK) {
        if (must) {
            fprintf(stderr, "plan m=%d n=%d k=%d epi %d: %s\n", m, n, k, epi, sd_last_error());
            exit(101);
        }
        printf("info plan m=%d n=%d k=%d epi %d unavailable: %s\n", m, n, k, epi, sd_last_error());
        return 0;
    }
    return p;
}

struct Model {
    int B, N;
    Params P;
    float *params, *grads, *m, *v;
    bf16 *wb; /* bf16 copy of params */
    uint8_t *decay;
    sdc_adamw_hyper *hyper;
    int32_t *tokens, *targets;
    /* activations (per layer: index l) */
    bf16 *enc, *ln1, *qkv, *att, *res2, *ln2, *fpre, *fgelu, *res3, *lnf, *logits;
    float *mean1, *rstd1, *mean2, *rstd2, *lse, *meanf, *rstdf, *losses, *loss;
    /* backward scratch */
    bf16 *dres, *dln, *dpre, *datt, *dqkv;
    void *att_scratch, *ln_scratch, *emb_scratch, *bias_scratch, *ws;
    size_t emb_scratch_bytes;
    Gemms g;
    cublasLtHandle_t lt;
    cudaStream_t s;

    const bf16 *w(int t) const { return wb + P.off[t]; }
    float *gr(int t) const { return grads + P.off[t]; }
};

static void alloc_model(Model &M, int B, cublasLtHandle_t lt, cudaStream_t s) {
    M.B = B;
    M.N = B * T;
    M.lt = lt;
    M.s = s;
    const int64_t n = M.P.total, N = M.N;
    M.params = (float *)dmalloc(n * 4);
    M.grads = (float *)dmalloc(n * 4);
    M.m = (float *)dmalloc(n * 4);
    M.v = (float *)dmalloc(n * 4);
    M.wb = (bf16 *)dmalloc(n * 2);
    M.decay = (uint8_t *)dmalloc(n / C);
    M.hyper = (sdc_adamw_hyper *)dmalloc(sizeof(sdc_adamw_hyper));
    M.tokens = (int32_t *)dmalloc(N * 4);
    M.targets = (int32_t *)dmalloc(N * 4);
    M.enc = (bf16 *)dmalloc(N * C * 2);
    M.ln1 = (bf16 *)dmalloc((size_t)L * N * C * 2);
    M.qkv = (bf16 *)dmalloc((size_t)L * N * 3 * C * 2);
    M.att = (bf16 *)dmalloc((size_t)L * N * C * 2);
    M.res2 = (bf16 *)dmalloc((size_t)L * N * C * 2);
    M.ln2 = (bf16 *)dmalloc((size_t)L * N * C * 2);
    M.fpre = (bf16 *)dmalloc((size_t)L * N * 4 * C * 2);
    M.fgelu = (bf16 *)dmalloc((size_t)L * N * 4 * C * 2);
    M.res3 = (bf16 *)dmalloc((size_t)L * N * C * 2);
    M.lnf = (bf16 *)dmalloc(N * C * 2);
    M.logits = (bf16 *)dmalloc((size_t)N * Vp * 2);
    M.mean1 = (float *)dmalloc((size_t)L * N * 4);
    M.rstd1 = (float *)dmalloc((size_t)L * N * 4);
    M.mean2 = (float *)dmalloc((size_t)L * N * 4);
    M.rstd2 = (float *)dmalloc((size_t)L * N * 4);
    M.lse = (float *)dmalloc((size_t)L * N * NH * 4);
    M.meanf = (float *)dmalloc(N * 4);
    M.rstdf = (float *)dmalloc(N * 4);
    M.losses = (float *)dmalloc(N * 4);
    M.loss = (float *)dmalloc(4);
    M.dres = (bf16 *)dmalloc(N * C * 2);
    M.dln = (bf16 *)dmalloc(N * C * 2);
    M.dpre = (bf16 *)dmalloc(N * 4 * C * 2);
    M.datt = (bf16 *)dmalloc(N * C * 2);
    M.dqkv = (bf16 *)dmalloc(N * 3 * C * 2);
    M.att_scratch = dmalloc(att_scratch_bytes(&g_ctx, g_att, B, T, C, NH));
    M.ln_scratch = dmalloc(ln_scratch_bytes(M.N, C));
    M.emb_scratch_bytes = embed_scratch_bytes(B, T, Vp);
    if (!M.emb_scratch_bytes) {
        fprintf(stderr, "sdc_embed_backward_bf16_scratch_bytes: 0\n");
        exit(101);
    }
    M.emb_scratch = dmalloc(M.emb_scratch_bytes);
    M.bias_scratch = dmalloc(bias_scratch_bytes(M.N, 4 * C));
    M.ws = dmalloc(WS_BYTES);

    Gemms &g = M.g;
    const int Nn = M.N;
    g.qkv = mkplan(Nn, 3 * C, C, 0, 1, SDC_BF16, SDC_BF16, SDC_BEPI_BIAS, 0);
    g.ap = mkplan(Nn, C, C, 0, 1, SDC_BF16, SDC_BF16, SDC_BEPI_BIAS, 1);
    g.fc = mkplan(Nn, 4 * C, C, 0, 1, SDC_BF16, SDC_BF16, SDC_BEPI_GELU_AUX_BIAS, 0);
    g.fp = mkplan(Nn, C, 4 * C, 0, 1, SDC_BF16, SDC_BF16, SDC_BEPI_BIAS, 1);
    g.lm = mkplan(Nn, Vp, C, 0, 1, SDC_BF16, SDC_BF16, SDC_BEPI_NONE, 0);
    g.lm_dinp = mkplan(Nn, C, Vp, 0, 0, SDC_BF16, SDC_BF16, SDC_BEPI_NONE, 0);
    g.lm_dw = mkplan(Vp, C, Nn, 1, 0, SDC_F32, SDC_F32, SDC_BEPI_NONE, 0);
    g.fp_dinp = mkplan(Nn, 4 * C, C, 0, 0, SDC_BF16, SDC_BF16, SDC_BEPI_DGELU, 0);
    g.fc_dinp = mkplan(Nn, C, 4 * C, 0, 0, SDC_BF16, SDC_BF16, SDC_BEPI_NONE, 0);
    g.ap_dinp = mkplan(Nn, C, C, 0, 0, SDC_BF16, SDC_BF16, SDC_BEPI_NONE, 0);
    g.qkv_dinp = mkplan(Nn, C, 3 * C, 0, 0, SDC_BF16, SDC_BF16, SDC_BEPI_NONE, 0);
    /* dW without the BGRAD_A epilogue, the bias gradients by sdc_bias_act_backward
     * (--bgrad-epilogue: in the dW GEMMs' epilogue, for comparison) */
    const int epi = g_bgrad_epilogue ? SDC_BEPI_BGRAD_A : SDC_BEPI_NONE;
    g.fp_dw = mkplan(C, 4 * C, Nn, 1, 0, SDC_F32, SDC_F32, epi, 0);
    g.fc_dw = mkplan(4 * C, C, Nn, 1, 0, SDC_F32, SDC_F32, epi, 0);
    g.ap_dw = mkplan(C, C, Nn, 1, 0, SDC_F32, SDC_F32, epi, 0);
    g.qkv_dw = mkplan(3 * C, C, Nn, 1, 0, SDC_F32, SDC_F32, epi, 0);
}

static void free_model(Model &M) {
    void *ps[] = {M.params, M.grads, M.m, M.v, M.wb, M.decay, M.hyper, M.tokens, M.targets, M.enc, M.ln1, M.qkv,
                  M.att, M.res2, M.ln2, M.fpre, M.fgelu, M.res3, M.lnf, M.logits, M.mean1, M.rstd1, M.mean2,
                  M.rstd2, M.lse, M.meanf, M.rstdf, M.losses, M.loss, M.dres, M.dln, M.dpre, M.datt, M.dqkv,
                  M.att_scratch, M.ln_scratch, M.emb_scratch, M.bias_scratch, M.ws};
    for (void *p : ps) CK(cudaFree(p));
    sdc_handle gs[] = {M.g.qkv, M.g.ap, M.g.fc, M.g.fp, M.g.lm, M.g.lm_dinp, M.g.lm_dw, M.g.fp_dw, M.g.fp_dinp,
                      M.g.fc_dw, M.g.fc_dinp, M.g.ap_dw, M.g.ap_dinp, M.g.qkv_dw, M.g.qkv_dinp};
    for (sdc_handle p : gs) sdc_bf16_gemm_destroy(p);
    g_tuned.clear();
}

/* GPT-2 initialisation (std 0.02, residual projections 0.02/sqrt(2L), LN 1 and 0, biases 0), the batch. */
static void init_model(Model &M) {
    const Params &P = M.P;
    const float sd = 0.02f, sdr = 0.02f / sqrtf(2.f * L);
    for (int t = 0; t < P_NUM; t++) {
        float s = 0.f, c = 0.f;
        switch (t) {
        case P_WTE: case P_WPE: case P_QKVW: case P_FCW: s = sd; break;
        case P_APW: case P_FPW: s = sdr; break;
        case P_LN1W: case P_LN2W: case P_LNFW: c = 1.f; break;
        default: break;
        }
        init_kernel<<<1024, 256, 0, M.s>>>(M.params + P.off[t], P.size[t], s, c, 1000 + t);
        CK(cudaGetLastError());
    }
    to_bf16_kernel<<<2048, 256, 0, M.s>>>(M.wb, M.params, P.total);
    CK(cudaGetLastError());
    CK(cudaMemsetAsync(M.m, 0, P.total * 4, M.s));
    CK(cudaMemsetAsync(M.v, 0, P.total * 4, M.s));
    CK(cudaMemsetAsync(M.grads, 0, P.total * 4, M.s));
    std::vector<uint8_t> decay(P.total / C, 0);
    const int dec[] = {P_WTE, P_WPE, P_QKVW, P_APW, P_FCW, P_FPW};
    for (int t : dec)
        for (int64_t i = P.off[t] / C; i < (P.off[t] + P.size[t]) / C; i++) decay[i] = 1;
    CK(cudaMemcpy(M.decay, decay.data(), decay.size(), cudaMemcpyHostToDevice));
    sdc_adamw_hyper h;
    memset(&h, 0, sizeof h);
    h.lr = 6e-4f; h.beta1 = 0.9f; h.beta2 = 0.95f; h.eps = 1e-8f; h.weight_decay = 0.1f; h.grad_scale = 1.f;
    h.step = 0; /* step_inc_kernel makes it 1 in the first step */
    CK(cudaMemcpy(M.hyper, &h, sizeof h, cudaMemcpyHostToDevice));
    std::vector<int32_t> tok(M.N), tgt(M.N);
    uint64_t r = 0x2545f4914f6cdd1dull;
    for (int b = 0; b < M.B; b++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        int x = (int)(r % 1024);
        for (int t = 0; t < T; t++) {
            const int nx = (17 * x + 5) % 1024;
            tok[(size_t)b * T + t] = x;
            tgt[(size_t)b * T + t] = nx;
            x = nx;
        }
    }
    CK(cudaMemcpy(M.tokens, tok.data(), M.N * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(M.targets, tgt.data(), M.N * 4, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
}

/* times the plan's candidates at its first run outside the capture (--no-tune: not) */
static void tune_once(Model &M, sdc_handle p, void *c, const void *a, const void *b, void *bias, void *aux) {
    cudaStreamCaptureStatus cs;
    CK(cudaStreamIsCapturing(M.s, &cs));
    bool tuned = false;
    for (sdc_handle q : g_tuned) tuned = tuned || q == p;
    if (g_tune && !tuned && cs == cudaStreamCaptureStatusNone) {
        /* the residual GEMMs accumulate into C: timed into the (idle) dln buffer */
        void *tc = (p == M.g.ap || p == M.g.fp) ? (void *)M.dln : c;
        SC(sdc_bf16_gemm_tune(&g_ctx, p, dptr(tc), dptr(a), dptr(b), dptr(bias), dptr(aux), dptr(M.ws), 8, 5));
        g_tuned.push_back(p);
    }
}

static void gemm(Model &M, sdc_handle p, void *c, const void *a, const void *b, void *bias = NULL, void *aux = NULL) {
    tune_once(M, p, c, a, b, bias, aux);
    SC(sdc_bf16_gemm_run(&g_ctx, p, dptr(c), dptr(a), dptr(b), dptr(bias), dptr(aux), dptr(M.ws)));
}

/* a residual add: d = a b^T + bias + c (the plan accumulates) */
static void gemm_into(Model &M, sdc_handle p, void *d, const void *c, const void *a, const void *b, void *bias) {
    tune_once(M, p, d, a, b, bias, NULL);
    SC(sdc_bf16_gemm_run_into(&g_ctx, p, dptr(d), dptr(c), dptr(a), dptr(b), dptr(bias), 0, dptr(M.ws)));
}

/* dW (and db) of a Linear from dout (N,OC) and its input x (N,IC). */
static void linear_dw(Model &M, sdc_handle p, float *dw, float *db, const bf16 *dout, const bf16 *x, int OC,
                      const char *dwname, const char *dbname) {
    if (g_bgrad_epilogue) {
        gemm(M, p, dw, dout, x, db);
        mark(M.s, dwname);
        return;
    }
    gemm(M, p, dw, dout, x);
    mark(M.s, dwname);
    SC(sdc_bias_act_backward(&g_ctx, SDC_BF16, dptr(dout), 0, M.N, OC, dptr(db), SDC_IDENTITY, 0, dptr(M.bias_scratch)));
    mark(M.s, dbname);
}

/* The whole step, enqueued on M.s (captured once, replayed). */
static void step(Model &M) {
    const int B = M.B, N = M.N;
    const Params &P = M.P;
    cudaStream_t s = M.s;
    const size_t NC = (size_t)N * C;
    step_inc_kernel<<<1, 1, 0, s>>>(M.hyper);
    CK(cudaGetLastError());
    mark(s, "start");
    /* the gradients that kernels add to: wpe, ln1 w+b, ln2 w+b, lnf w+b (each pair adjacent) */
    CK(cudaMemsetAsync(M.gr(P_WPE), 0, P.size[P_WPE] * 4, s));
    CK(cudaMemsetAsync(M.gr(P_LN1W), 0, 2 * P.size[P_LN1W] * 4, s));
    CK(cudaMemsetAsync(M.gr(P_LN2W), 0, 2 * P.size[P_LN2W] * 4, s));
    CK(cudaMemsetAsync(M.gr(P_LNFW), 0, 2 * P.size[P_LNFW] * 4, s));
    mark(s, "step counter, memsets");

    /* ---- forward ---- */
    SC(sdc_embed_bf16(&g_ctx, dptr(M.enc), dptr(M.tokens), dptr(M.w(P_WTE)), dptr(M.w(P_WPE)), B, T, C));
    mark(s, "embedding forward");
    for (int l = 0; l < L; l++) {
        const bf16 *x = l == 0 ? M.enc : M.res3 + (size_t)(l - 1) * NC;
        bf16 *ln1 = M.ln1 + l * NC, *qkv = M.qkv + l * NC * 3, *att = M.att + l * NC, *res2 = M.res2 + l * NC;
        bf16 *ln2 = M.ln2 + l * NC, *fpre = M.fpre + l * NC * 4, *fgelu = M.fgelu + l * NC * 4;
        bf16 *res3 = M.res3 + l * NC;
        SC(sdc_layer_norm(&g_ctx, SDC_BF16, dptr(ln1), dptr(M.mean1 + (size_t)l * N), dptr(M.rstd1 + (size_t)l * N), dptr(x), dptr(M.w(P_LN1W) + l * C), dptr(M.w(P_LN1B) + l * C), N, C, 1e-5f));
        mark(s, "layernorm forward");
        gemm(M, M.g.qkv, qkv, ln1, M.w(P_QKVW) + (size_t)l * 3 * C * C, (void *)(M.w(P_QKVB) + l * 3 * C));
        mark(s, "qkv GEMM +bias");
        SC(sdc_attention_bf16(&g_ctx, g_att, dptr(att), dptr(M.lse + (size_t)l * N * NH), dptr(qkv), B, T, C, NH));
        mark(s, "attention forward");
        gemm_into(M, M.g.ap, res2, x, att, M.w(P_APW) + (size_t)l * C * C, (void *)(M.w(P_APB) + l * C));
        mark(s, "attproj GEMM +bias+residual");
        SC(sdc_layer_norm(&g_ctx, SDC_BF16, dptr(ln2), dptr(M.mean2 + (size_t)l * N), dptr(M.rstd2 + (size_t)l * N), dptr(res2), dptr(M.w(P_LN2W) + l * C), dptr(M.w(P_LN2B) + l * C), N, C, 1e-5f));
        mark(s, "layernorm forward");
        gemm(M, M.g.fc, fgelu, ln2, M.w(P_FCW) + (size_t)l * 4 * C * C, (void *)(M.w(P_FCB) + l * 4 * C), fpre);
        mark(s, "fc GEMM +bias+GELU(aux)");
        gemm_into(M, M.g.fp, res3, res2, fgelu, M.w(P_FPW) + (size_t)l * 4 * C * C, (void *)(M.w(P_FPB) + l * C));
        mark(s, "fcproj GEMM +bias+residual");
    }
    const bf16 *top = M.res3 + (size_t)(L - 1) * NC;
    SC(sdc_layer_norm(&g_ctx, SDC_BF16, dptr(M.lnf), dptr(M.meanf), dptr(M.rstdf), dptr(top), dptr(M.w(P_LNFW)), dptr(M.w(P_LNFB)), N, C, 1e-5f));
    mark(s, "layernorm forward");
    gemm(M, M.g.lm, M.logits, M.lnf, M.w(P_WTE));
    mark(s, "head GEMM");
    SC(sdc_softmax_xent(&g_ctx, SDC_BF16, dptr(M.logits), dptr(M.targets), N, V, Vp, dptr(M.logits), 1.f / (float)N, 0, 0, dptr(M.losses)));
    mean_kernel<<<1, 1024, 0, s>>>(M.loss, M.losses, N);
    CK(cudaGetLastError());
    mark(s, "classifier, mean loss");

    /* ---- backward ---- */
    gemm(M, M.g.lm_dw, M.gr(P_WTE), M.logits, M.lnf);  /* dwte written (Vp x C) */
    mark(s, "head dW GEMM");
    gemm(M, M.g.lm_dinp, M.dln, M.logits, M.w(P_WTE)); /* dlnf */
    mark(s, "head dinp GEMM");
    CK(cudaMemsetAsync(M.dres, 0, NC * 2, s));
    SC(sdc_layer_norm_backward(&g_ctx, SDC_BF16, dptr(M.dres), dptr(M.gr(P_LNFW)), dptr(M.gr(P_LNFB)), dptr(M.dln), dptr(top), dptr(M.w(P_LNFW)), dptr(M.meanf), dptr(M.rstdf), N, C, 1, dptr(M.ln_scratch)));
    mark(s, "layernorm backward");
    for (int l = L - 1; l >= 0; l--) {
        const bf16 *x = l == 0 ? M.enc : M.res3 + (size_t)(l - 1) * NC;
        bf16 *ln1 = M.ln1 + l * NC, *qkv = M.qkv + l * NC * 3, *att = M.att + l * NC, *res2 = M.res2 + l * NC;
        bf16 *ln2 = M.ln2 + l * NC, *fpre = M.fpre + l * NC * 4, *fgelu = M.fgelu + l * NC * 4;
        linear_dw(M, M.g.fp_dw, M.gr(P_FPW) + (size_t)l * 4 * C * C, M.gr(P_FPB) + l * C, M.dres, fgelu, C,
                  "fcproj dW GEMM", "bias backward");
        gemm(M, M.g.fp_dinp, M.dpre, M.dres, M.w(P_FPW) + (size_t)l * 4 * C * C, NULL, fpre);
        mark(s, "fcproj dinp GEMM +dGELU");
        linear_dw(M, M.g.fc_dw, M.gr(P_FCW) + (size_t)l * 4 * C * C, M.gr(P_FCB) + l * 4 * C, M.dpre, ln2, 4 * C,
                  "fc dW GEMM", "bias backward");
        gemm(M, M.g.fc_dinp, M.dln, M.dpre, M.w(P_FCW) + (size_t)l * 4 * C * C);
        mark(s, "fc dinp GEMM");
        SC(sdc_layer_norm_backward(&g_ctx, SDC_BF16, dptr(M.dres), dptr(M.gr(P_LN2W) + l * C), dptr(M.gr(P_LN2B) + l * C), dptr(M.dln), dptr(res2), dptr(M.w(P_LN2W) + l * C), dptr(M.mean2 + (size_t)l * N), dptr(M.rstd2 + (size_t)l * N), N, C, 1, dptr(M.ln_scratch)));
        mark(s, "layernorm backward");
        linear_dw(M, M.g.ap_dw, M.gr(P_APW) + (size_t)l * C * C, M.gr(P_APB) + l * C, M.dres, att, C,
                  "attproj dW GEMM", "bias backward");
        gemm(M, M.g.ap_dinp, M.datt, M.dres, M.w(P_APW) + (size_t)l * C * C);
        mark(s, "attproj dinp GEMM");
        SC(sdc_attention_backward_bf16(&g_ctx, g_att, dptr(M.dqkv), dptr(M.datt), dptr(qkv), dptr(att),
                                       dptr(M.lse + (size_t)l * N * NH), B, T, C, NH, dptr(M.att_scratch)));
        mark(s, "attention backward");
        linear_dw(M, M.g.qkv_dw, M.gr(P_QKVW) + (size_t)l * 3 * C * C, M.gr(P_QKVB) + l * 3 * C, M.dqkv, ln1, 3 * C,
                  "qkv dW GEMM", "bias backward");
        gemm(M, M.g.qkv_dinp, M.dln, M.dqkv, M.w(P_QKVW) + (size_t)l * 3 * C * C);
        mark(s, "qkv dinp GEMM");
        SC(sdc_layer_norm_backward(&g_ctx, SDC_BF16, dptr(M.dres), dptr(M.gr(P_LN1W) + l * C), dptr(M.gr(P_LN1B) + l * C), dptr(M.dln), dptr(x), dptr(M.w(P_LN1W) + l * C), dptr(M.mean1 + (size_t)l * N), dptr(M.rstd1 + (size_t)l * N), N, C, 1, dptr(M.ln_scratch)));
        mark(s, "layernorm backward");
    }
    SC(sdc_embed_backward_bf16(&g_ctx, dptr(M.gr(P_WTE)), dptr(M.gr(P_WPE)), dptr(M.dres), dptr(M.tokens), B, T, C, Vp, dptr(M.emb_scratch), (int64_t)M.emb_scratch_bytes));
    mark(s, "embedding backward");

    /* ---- AdamW ---- */
    SC(sdc_adamw_bf16(&g_ctx, dptr(M.params), dptr(M.wb), dptr(M.grads), dptr(M.m), dptr(M.v), dptr(M.decay), C, P.total, dptr(M.hyper)));
    mark(s, "AdamW (+bf16 copy)");
}

static float read_loss(Model &M) {
    float l = 0;
    CK(cudaStreamSynchronize(M.s));
    CK(cudaMemcpy(&l, M.loss, 4, cudaMemcpyDeviceToHost));
    return l;
}

/* --breakdown: two eager steps with an event after each operation; the
 * second one's intervals summed per name, largest first. */
static void breakdown(Model &M, float graph_ms) {
    std::vector<std::pair<std::string, double>> sums;
    double total = 0;
    for (int rep = 0; rep < 2; rep++) {
        for (Mark &m : g_marks) CK(cudaEventDestroy(m.ev));
        g_marks.clear();
        g_marking = true;
        step(M);
        g_marking = false;
        CK(cudaStreamSynchronize(M.s));
    }
    for (size_t i = 1; i < g_marks.size(); i++) {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, g_marks[i - 1].ev, g_marks[i].ev));
        total += ms;
        size_t j = 0;
        while (j < sums.size() && sums[j].first != g_marks[i].name) j++;
        if (j == sums.size()) sums.push_back({g_marks[i].name, 0.0});
        sums[j].second += ms;
    }
    std::sort(sums.begin(), sums.end(), [](const std::pair<std::string, double> &a,
                                           const std::pair<std::string, double> &b) { return a.second > b.second; });
    printf("breakdown B=%d (an eager step, events between operations; the graph's step %.2f ms):\n", M.B, graph_ms);
    for (auto &p : sums) printf("  %-32s %8.3f ms  %5.1f%%\n", p.first.c_str(), p.second, 100 * p.second / total);
    printf("  %-32s %8.3f ms\n", "sum", total);
    for (Mark &m : g_marks) CK(cudaEventDestroy(m.ev));
    g_marks.clear();
}

/* Returns 0 when the loss fell as it must. */
static int run(int B, int steps, int timed, cublasLtHandle_t lt, cudaStream_t s) {
    size_t free0 = 0, free1 = 0, total = 0;
    CK(cudaDeviceSynchronize());
    CK(cudaMemGetInfo(&free0, &total));
    Model M;
    alloc_model(M, B, lt, s);
    init_model(M);
    printf("---- GPT-2 124M step, B=%d T=%d (%d tokens), %lld parameters ----\n", B, T, M.N, (long long)M.P.total);

    step(M); /* step 1, eager: sets kernel attributes, warms cuBLASLt */
    const float loss1 = read_loss(M);
    printf("step   1 loss %.4f (eager; ln(%d) = %.4f)\n", loss1, Vp, logf((float)Vp));

    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    step(M);
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiateWithFlags(&exec, graph, 0));

    float loss = loss1;
    for (int i = 2; i <= steps; i++) {
        CK(cudaGraphLaunch(exec, s));
        loss = read_loss(M);
        if (i == 2) {
            CK(cudaMemGetInfo(&free1, &total));
            printf("graph: captured and replayed\n");
        }
        if (i <= 5 || i % 5 == 0 || i == steps) printf("step %3d loss %.4f\n", i, loss);
    }
    const bool finite = isfinite(loss) && isfinite(loss1);
    const bool fell = finite && loss < loss1 - 1.0f;
    printf("loss %s: %.4f -> %.4f over %d steps (must fall by more than 1.0)\n", fell ? "PASS" : "FAIL", loss1, loss,
           steps);

    for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(exec, s));
    CK(cudaStreamSynchronize(s));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < timed; i++) CK(cudaGraphLaunch(exec, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ms /= (float)timed;
    const double tps = M.N / (ms * 1e-3);
    const double flops_tok = 6.0 * (double)M.P.total + 6.0 * L * C * T;
    const double mfu = tps * flops_tok / 989e12;
    const double torch_ms = B == 16 ? 32.8 : (B == 32 ? 63.5 : 0.0); /* GPU-HOST.md, torch.compile bf16 */
    printf("RESULT step B=%d attention %s: %.2f ms/step, %.0f tokens/s, MFU %.1f%% (6N+6LCT = %.3g FLOP/token, peak 989e12)",
           B, g_att_name, ms, tps, 100 * mfu, flops_tok);
    if (torch_ms > 0) printf(", torch.compile %.1f ms: x%.3f", torch_ms, torch_ms / ms);
    printf("\n");
    printf("memory B=%d: %.2f GiB of device memory in use by the step (cudaMemGetInfo before/after), %.1f GiB total\n",
           B, (double)(free0 - free1) / (1 << 30), (double)total / (1 << 30));
    float lossT = read_loss(M);
    printf("loss after %d more steps: %.4f\n", 3 + timed, lossT);
    if (g_breakdown) breakdown(M, ms);

    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    free_model(M);
    return fell ? 0 : 1;
}

int main(int argc, char **argv) {
    std::vector<int> batches = {16, 32};
    int steps = 20, timed = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            batches.clear();
            for (char *p = strtok(argv[++i], ","); p; p = strtok(NULL, ",")) batches.push_back(atoi(p));
        } else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
            steps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--timed") && i + 1 < argc) {
            timed = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--attention") && i + 1 < argc) {
            g_att_name = argv[++i];
            if (!strcmp(g_att_name, "mma")) {
                g_att = SDC_ATTN_MMA;
            } else if (!strcmp(g_att_name, "wmma")) {
                g_att = SDC_ATTN_WMMA;
            } else if (!strcmp(g_att_name, "cudnn")) {
                g_att = SDC_ATTN_CUDNN;
            } else if (strcmp(g_att_name, "auto") != 0) {
                fprintf(stderr, "--attention auto, cudnn, mma or wmma\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--no-tune")) {
            g_tune = false;
        } else if (!strcmp(argv[i], "--bgrad-epilogue")) {
            g_bgrad_epilogue = true;
        } else if (!strcmp(argv[i], "--breakdown")) {
            g_breakdown = true;
        } else {
            fprintf(stderr, "usage: %s [--batch 16,32] [--steps 20] [--timed 20] [--attention auto|cudnn|mma|wmma] "
                            "[--no-tune] [--bgrad-epilogue] [--breakdown]\n",
                    argv[0]);
            return 2;
        }
    }
    if (steps < 2 || timed < 1) {
        fprintf(stderr, "--steps at least 2, --timed at least 1\n");
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    if (batches.empty()) {
        fprintf(stderr, "--batch: no batch size given\n");
        return 2;
    }
    for (int B : batches) {
        if (B < 1 || B > 64) {
            fprintf(stderr, "batch %d out of range\n", B);
            return 2;
        }
    }
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    SC(sdc_create(dptr(s), 0, &g_ctx));
    /* asked at the first batch that runs: a plan built here is the one that
     * batch uses (another size would build one for nothing) */
    printf("device %s, %d SMs, sdc ABI %d, attention: %s (auto takes cuDNN's where its plans build (%s at B=%d), "
           "else %s), GEMMs %s, bias gradients %s\n",
           prop.name, prop.multiProcessorCount, sdc_abi_version(), g_att_name,
           att_supported(&g_ctx, SDC_ATTN_CUDNN, batches[0], T, C, NH) ? "yes" : "no", batches[0],
           att_supported(&g_ctx, SDC_ATTN_MMA, batches[0], T, C, NH) ? "mma" : "wmma",
           g_tune ? "tuned at first use" : "heuristic's", g_bgrad_epilogue ? "in the dW epilogue" : "by sdc_bias_act_backward");
    cublasLtHandle_t lt;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasLtCreate failed\n");
        return 100;
    }
    int fails = 0;
    for (int B : batches) fails += run(B, steps, timed, lt, s);
    cublasLtDestroy(lt);
    SC(sdc_destroy(&g_ctx));
    printf("==== step %s\n", fails ? "FAIL (loss did not fall)" : "PASS");
    return fails ? 1 : 0;
}
