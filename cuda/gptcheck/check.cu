/*
 * cuda/gptcheck/check.cu: every bf16 kernel of the library (symddp_compute.h's
 * sdc_* with SDC_BF16 and the bf16 forms: the GEMM plans, the attention's
 * implementations) against a plain CPU reference on random data, at gpt-tiny and GPT-2 124M sizes, then each one
 * timed with CUDA events at GPT-2 124M shapes (B=16, T=1024, C=768, 12 heads,
 * V=50304). Built and run by scripts/gpu-gpt-kernels-check.sh:
 *
 *   cuda/build.sh
 *   nvcc -O3 -std=c++17 -arch=sm_90 -cudart shared -Icuda cuda/gptcheck/check.cu -Lbuild -lsymddp_cuda \
 *       -Xlinker -rpath=build -lcublasLt -lcublas
 *
 * Prints one line per check: "check NAME max_abs_err max_rel_err PASS|FAIL (tol ...)",
 * where an element passes when |gpu - ref| <= atol + rtol*|ref|, atol a
 * fraction of the reference's RMS (bf16 keeps 8 bits: rtol 1-3e-2 for bf16
 * results, 1e-4..1e-3 for fp32 ones); "repeat NAME bits identical|DIFFER" for
 * the reductions that promise the same bits every run; then "time NAME us
 * GB/s|TFLOP/s". Exit status: the number of failures (0: all passed).
 * --no-time skips the timings, --no-big the GPT-2-size checks, --time-only every check.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "check_macros.h"

static int g_fail = 0;
static cudaStream_t g_stream;
static sdc_ctx g_ctx; /* the compute ABI's context over g_stream */

/* ---- host bf16 ---- */
static uint16_t f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- random numbers ---- */
static uint64_t g_rng = 0x243f6a8885a308d3ull;
static uint32_t rnd_u32() {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static float rnd_uniform() { return ((rnd_u32() & 0xffffff) + 0.5f) / 16777216.f; }
static float rnd_normal() {
    float u = rnd_uniform(), v = rnd_uniform();
    return sqrtf(-2.f * logf(u)) * cosf(6.2831853f * v);
}
/* n bf16 values (as bits) of std sd, and their floats. */
static void rnd_bf16(std::vector<uint16_t> &h, std::vector<float> &f, size_t n, float sd, float mean = 0.f) {
    h.resize(n);
    f.resize(n);
    for (size_t i = 0; i < n; i++) {
        h[i] = f2bf(mean + sd * rnd_normal());
        f[i] = bf2f(h[i]);
    }
}
static void rnd_f32(std::vector<float> &f, size_t n, float sd) {
    f.resize(n);
    for (size_t i = 0; i < n; i++) f[i] = sd * rnd_normal();
}

/* ---- device buffers ---- */
struct Dev {
    void *p = nullptr;
    size_t bytes = 0;
    explicit Dev(size_t b) : bytes(b) { CK(cudaMalloc(&p, b ? b : 16)); }
    ~Dev() {
        if (p) cudaFree(p);
    }
    Dev(const Dev &) = delete;
    Dev &operator=(const Dev &) = delete;
    float *f() const { return (float *)p; }
    int32_t *i() const { return (int32_t *)p; }
};
template <class T> static void up(Dev &d, const std::vector<T> &h) {
    CK(cudaMemcpy(d.p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T> static std::vector<T> down(const Dev &d, size_t n) {
    std::vector<T> h(n);
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(h.data(), d.p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}
static std::vector<float> down_bf16(const Dev &d, size_t n) {
    std::vector<uint16_t> h = down<uint16_t>(d, n);
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) f[i] = bf2f(h[i]);
    return f;
}

/* ---- comparison ---- */
static void compare(const char *name, const float *got, const double *ref, size_t n, double rtol, double atol_frac) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += ref[i] * ref[i];
    const double rms = n ? sqrt(ss / (double)n) : 0.0;
    const double atol = atol_frac * (rms > 0 ? rms : 1.0);
    double max_abs = 0, max_rel = 0;
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - ref[i]);
        if (!(d <= atol + rtol * fabs(ref[i]))) {
            if (!bad) first_bad = i;
            bad++;
        }
        if (!(d <= max_abs)) max_abs = d;
        const double rel = d / fmax(fabs(ref[i]), atol);
        if (!(rel <= max_rel)) max_rel = rel;
    }
    printf("check %-34s %10.3e %10.3e %s (rtol %.0e, atol %.0e x rms %.3e; n %zu)", name, max_abs, max_rel,
           bad ? "FAIL" : "PASS", rtol, atol_frac, rms, n);
    if (bad) printf(" %zu bad, first [%zu] gpu %.6g ref %.6g", bad, first_bad, (double)got[first_bad], ref[first_bad]);
    printf("\n");
    if (bad) g_fail++;
}
static void compare_v(const char *name, const std::vector<float> &got, const std::vector<double> &ref, double rtol,
                      double atol_frac) {
    compare(name, got.data(), ref.data(), ref.size(), rtol, atol_frac);
}
static void repeat_check(const char *name, const void *a, const void *b, size_t bytes) {
    const bool same = memcmp(a, b, bytes) == 0;
    printf("repeat %-33s bits %s\n", name, same ? "identical PASS" : "DIFFER FAIL");
    if (!same) g_fail++;
}

/* ---- timing ---- */
template <class F> static double time_us(F fn, int iters) {
    fn(); /* warm-up */
    CK(cudaStreamSynchronize(g_stream));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventRecord(a, g_stream));
    for (int i = 0; i < iters; i++) fn();
    CK(cudaEventRecord(b, g_stream));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return 1000.0 * ms / iters;
}
static void report_bw(const char *name, double us, double bytes) {
    printf("time %-35s %10.1f us %8.0f GB/s\n", name, us, bytes / (us * 1e3));
}
static void report_fl(const char *name, double us, double flops) {
    printf("time %-35s %10.1f us %8.1f TFLOP/s\n", name, us, flops / (us * 1e6));
}

/* ================= layernorm ================= */
extern "C" int sdc_lnb_force_generic; /* sd_compute_layernorm.cu: 1 = the bf16 forward's generic form */

static void check_layernorm(const char *tag, int N, int C) {
    char name[96];
    std::vector<uint16_t> hx, hw, hb, hdy, hr;
    std::vector<float> x, w, b, dy, r;
    rnd_bf16(hx, x, (size_t)N * C, 1.5f, 0.3f);
    rnd_bf16(hw, w, C, 0.2f, 1.0f);
    rnd_bf16(hb, b, C, 0.2f);
    rnd_bf16(hdy, dy, (size_t)N * C, 1.0f);
    rnd_bf16(hr, r, (size_t)N * C, 1.0f);
    std::vector<float> dw0, db0;
    rnd_f32(dw0, C, 1.0f);
    rnd_f32(db0, C, 1.0f);
    Dev dx(hx.size() * 2), dwt(C * 2), dbs(C * 2), dout(hx.size() * 2), dmean(N * 4), drstd(N * 4);
    Dev ddy(hx.size() * 2), dres(hx.size() * 2), ddw(C * 4), ddb(C * 4);
    Dev scratch(ln_scratch_bytes(N, C));
    up(dx, hx); up(dwt, hw); up(dbs, hb); up(ddy, hdy);
    SC(sdc_layer_norm(&g_ctx, SDC_BF16, dptr(dout.p), dptr(dmean.f()), dptr(drstd.f()), dptr(dx.p), dptr(dwt.p), dptr(dbs.p), N, C, 1e-5f));
    std::vector<double> ro((size_t)N * C), rm(N), rr(N);
    for (int i = 0; i < N; i++) {
        const float *xi = &x[(size_t)i * C];
        double mu = 0, var = 0;
        for (int c = 0; c < C; c++) mu += xi[c];
        mu /= C;
        for (int c = 0; c < C; c++) var += (xi[c] - mu) * (xi[c] - mu);
        var /= C;
        const double rs = 1.0 / sqrt(var + 1e-5);
        rm[i] = mu;
        rr[i] = rs;
        for (int c = 0; c < C; c++) ro[(size_t)i * C + c] = (xi[c] - mu) * rs * w[c] + b[c];
    }
    snprintf(name, sizeof name, "layernorm_fwd.out %s", tag);
    compare_v(name, down_bf16(dout, ro.size()), ro, 1e-2, 1e-2);
    snprintf(name, sizeof name, "layernorm_fwd.mean %s", tag);
    compare_v(name, down<float>(dmean, N), rm, 1e-4, 1e-4);
    snprintf(name, sizeof name, "layernorm_fwd.rstd %s", tag);
    compare_v(name, down<float>(drstd, N), rr, 1e-4, 1e-4);

    /* backward, twice from the same starting values: the bits must repeat */
    std::vector<float> got_dx[2], got_dw[2], got_db[2];
    for (int rep = 0; rep < 2; rep++) {
        up(dres, hr); up(ddw, dw0); up(ddb, db0);
        SC(sdc_layer_norm_backward(&g_ctx, SDC_BF16, dptr(dres.p), dptr(ddw.f()), dptr(ddb.f()), dptr(ddy.p), dptr(dx.p), dptr(dwt.p), dptr(dmean.f()), dptr(drstd.f()), N, C, 1, dptr(scratch.p)));
        got_dx[rep] = down_bf16(dres, (size_t)N * C);
        got_dw[rep] = down<float>(ddw, C);
        got_db[rep] = down<float>(ddb, C);
    }
    std::vector<double> rdx((size_t)N * C), rdw(C), rdb(C);
    for (int c = 0; c < C; c++) { rdw[c] = dw0[c]; rdb[c] = db0[c]; }
    for (int i = 0; i < N; i++) {
        const float *xi = &x[(size_t)i * C], *gi = &dy[(size_t)i * C];
        double sg = 0, sgx = 0;
        for (int c = 0; c < C; c++) {
            const double xh = (xi[c] - rm[i]) * rr[i];
            sg += gi[c] * w[c];
            sgx += gi[c] * w[c] * xh;
        }
        sg /= C;
        sgx /= C;
        for (int c = 0; c < C; c++) {
            const double xh = (xi[c] - rm[i]) * rr[i];
            rdx[(size_t)i * C + c] = r[(size_t)i * C + c] + (gi[c] * w[c] - sg - xh * sgx) * rr[i];
            rdw[c] += gi[c] * xh;
            rdb[c] += gi[c];
        }
    }
    snprintf(name, sizeof name, "layernorm_bwd.dinp %s", tag);
    compare_v(name, got_dx[0], rdx, 1e-2, 1e-2);
    snprintf(name, sizeof name, "layernorm_bwd.dweight %s", tag);
    compare_v(name, got_dw[0], rdw, 1e-4, 1e-4);
    snprintf(name, sizeof name, "layernorm_bwd.dbias %s", tag);
    compare_v(name, got_db[0], rdb, 1e-4, 1e-4);
    snprintf(name, sizeof name, "layernorm_bwd %s", tag);
    repeat_check(name, got_dw[0].data(), got_dw[1].data(), C * 4);

    /* rows of up to 1024 channels take the forward's register form: the
     * generic form's bits */
    const std::vector<float> reg_out = down_bf16(dout, (size_t)N * C), reg_mean = down<float>(dmean, N),
                             reg_rstd = down<float>(drstd, N);
    sdc_lnb_force_generic = 1;
    SC(sdc_layer_norm(&g_ctx, SDC_BF16, dptr(dout.p), dptr(dmean.f()), dptr(drstd.f()), dptr(dx.p), dptr(dwt.p), dptr(dbs.p), N, C, 1e-5f));
    const std::vector<float> gen_out = down_bf16(dout, (size_t)N * C), gen_mean = down<float>(dmean, N),
                             gen_rstd = down<float>(drstd, N);
    sdc_lnb_force_generic = 0;
    const bool same = !memcmp(reg_out.data(), gen_out.data(), (size_t)N * C * 4) &&
                      !memcmp(reg_mean.data(), gen_mean.data(), N * 4) && !memcmp(reg_rstd.data(), gen_rstd.data(), N * 4);
    snprintf(name, sizeof name, "layernorm_fwd %s: %s form against the generic one", tag,
             (C / 8 + 31) / 32 <= 4 ? "register" : "generic");
    printf("check %-60s bits %s\n", name, same ? "identical PASS" : "DIFFER FAIL");
    if (!same) g_fail++;
}

/* ================= gelu ================= */
static double gelu_ref(double x) {
    const double k = 0.7978845608028654; /* sqrt(2/pi) */
    return 0.5 * x * (1 + tanh(k * (x + 0.044715 * x * x * x)));
}
static double gelu_grad_ref(double x) {
    const double k = 0.7978845608028654; /* sqrt(2/pi) */
    const double t = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}
static void check_gelu(const char *tag, int64_t n) {
    char name[96];
    std::vector<uint16_t> hx, hd;
    std::vector<float> x, d;
    rnd_bf16(hx, x, n, 2.0f);
    rnd_bf16(hd, d, n, 1.0f);
    Dev dx(n * 2), dy(n * 2), dd(n * 2);
    up(dx, hx); up(dd, hd);
    SC(sdc_gelu(&g_ctx, SDC_BF16, dptr(dy.p), dptr(dx.p), n));
    SC(sdc_gelu_backward(&g_ctx, SDC_BF16, dptr(dd.p), dptr(dd.p), dptr(dx.p), n)); /* in place */
    std::vector<double> ry(n), rd(n);
    for (int64_t i = 0; i < n; i++) {
        ry[i] = gelu_ref(x[i]);
        rd[i] = d[i] * gelu_grad_ref(x[i]);
    }
    snprintf(name, sizeof name, "gelu_fwd %s", tag);
    compare_v(name, down_bf16(dy, n), ry, 1e-2, 1e-2);
    snprintf(name, sizeof name, "gelu_bwd (in place) %s", tag);
    compare_v(name, down_bf16(dd, n), rd, 1e-2, 1e-2);
}

/* ================= embedding ================= */
static void check_embed(const char *tag, int B, int T, int C, int V) {
    char name[96];
    const int N = B * T;
    std::vector<uint16_t> hwte, hwpe, hdo;
    std::vector<float> wte, wpe, dout;
    rnd_bf16(hwte, wte, (size_t)V * C, 0.5f);
    rnd_bf16(hwpe, wpe, (size_t)T * C, 0.5f);
    rnd_bf16(hdo, dout, (size_t)N * C, 1.0f);
    std::vector<int32_t> tok(N);
    for (int i = 0; i < N; i++) tok[i] = (i % 7 == 0) ? 3 % V : (int32_t)(rnd_u32() % (uint32_t)V); /* a frequent token */
    std::vector<float> gte0, gpe0;
    rnd_f32(gte0, (size_t)V * C, 0.1f);
    rnd_f32(gpe0, (size_t)T * C, 0.1f);
    Dev dwte(hwte.size() * 2), dwpe(hwpe.size() * 2), dtok(N * 4), dout_d((size_t)N * C * 2), ddo(hdo.size() * 2);
    Dev dgte(gte0.size() * 4), dgpe(gpe0.size() * 4);
    const size_t sb = embed_scratch_bytes(B, T, V);
    if (sb == 0) {
        printf("check embed %s FAIL: no scratch size\n", tag);
        g_fail++;
        return;
    }
    Dev scratch(sb);
    up(dwte, hwte); up(dwpe, hwpe); up(dtok, tok); up(ddo, hdo);
    SC(sdc_embed_bf16(&g_ctx, dptr(dout_d.p), dptr(dtok.i()), dptr(dwte.p), dptr(dwpe.p), B, T, C));
    std::vector<double> ro((size_t)N * C);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++)
            ro[(size_t)i * C + c] = (double)wte[(size_t)tok[i] * C + c] + wpe[(size_t)(i % T) * C + c];
    snprintf(name, sizeof name, "embed_fwd %s", tag);
    compare_v(name, down_bf16(dout_d, ro.size()), ro, 1e-2, 1e-2);
    std::vector<float> gte[2], gpe[2];
    for (int rep = 0; rep < 2; rep++) {
        up(dgte, gte0); up(dgpe, gpe0);
        SC(sdc_embed_backward_bf16(&g_ctx, dptr(dgte.f()), dptr(dgpe.f()), dptr(ddo.p), dptr(dtok.i()), B, T, C, V, dptr(scratch.p), (int64_t)sb));
        gte[rep] = down<float>(dgte, gte0.size());
        gpe[rep] = down<float>(dgpe, gpe0.size());
    }
    std::vector<double> rte(gte0.begin(), gte0.end()), rpe(gpe0.begin(), gpe0.end());
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) {
            rte[(size_t)tok[i] * C + c] += dout[(size_t)i * C + c];
            rpe[(size_t)(i % T) * C + c] += dout[(size_t)i * C + c];
        }
    snprintf(name, sizeof name, "embed_bwd.dwte %s", tag);
    compare_v(name, gte[0], rte, 1e-4, 1e-4);
    snprintf(name, sizeof name, "embed_bwd.dwpe %s", tag);
    compare_v(name, gpe[0], rpe, 1e-4, 1e-4);
    snprintf(name, sizeof name, "embed_bwd.dwte %s", tag);
    repeat_check(name, gte[0].data(), gte[1].data(), gte0.size() * 4);
}

/* ================= attention ================= */
/* Forward in double from the bf16 inputs: out (B,T,C), lse (B,NH,T) natural log. */
static void attention_fwd_ref(const std::vector<float> &qkv, int B, int T, int C, int NH, std::vector<double> &out,
                              std::vector<double> &lse) {
    const int hs = C / NH;
    const double scale = 1.0 / sqrt((double)hs);
    out.assign((size_t)B * T * C, 0.0);
    lse.assign((size_t)B * NH * T, 0.0);
    std::vector<double> p(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const float *q = &qkv[((size_t)b * T + i) * 3 * C + h * hs];
                double mx = -1e300;
                for (int j = 0; j <= i; j++) {
                    const float *k = &qkv[((size_t)b * T + j) * 3 * C + C + h * hs];
                    double s = 0;
                    for (int d = 0; d < hs; d++) s += (double)q[d] * k[d];
                    p[j] = s * scale;
                    if (p[j] > mx) mx = p[j];
                }
                double sum = 0;
                for (int j = 0; j <= i; j++) {
                    p[j] = exp(p[j] - mx);
                    sum += p[j];
                }
                lse[((size_t)b * NH + h) * T + i] = mx + log(sum);
                double *o = &out[((size_t)b * T + i) * C + h * hs];
                for (int j = 0; j <= i; j++) {
                    const float *v = &qkv[((size_t)b * T + j) * 3 * C + 2 * C + h * hs];
                    for (int d = 0; d < hs; d++) o[d] += p[j] / sum * v[d];
                }
            }
}

/* Backward in double: P = exp(S*scale - lse), D_i = dout_i . out_i, dS = P (dP - D) scale,
 * dV = P^T dout, dK = dS^T Q, dQ = dS K, from the out and lse given. With emulate, it
 * rounds where the kernels round: P to bf16 before P^T dout, dS to bf16 before its two
 * products (each from the fp32 value, as __float2bfloat16 does); given the GPU's own
 * bf16 out and fp32 lse it is then the kernels' arithmetic up to fp32 accumulation.
 * mag (same shape as dqkv): the sum of |terms| of each element, where a dS term counts
 * P (|dP| + Dabs) scale with Dabs_i = sum_d |dout_id| sum_j P_ij |v_jd|, the size that
 * the error of D (from the forward's roundings of P and out) is relative to:
 *   dV_jd: sum_i P_ij |dout_id|;  dK_jd: sum_i dSabs_ij |q_id|;  dQ_id: sum_j dSabs_ij |k_jd|. */
static void attention_bwd_ref(const std::vector<float> &qkv, const std::vector<float> &dout,
                              const std::vector<double> &out, const std::vector<double> &lse, int B, int T, int C,
                              int NH, bool emulate, std::vector<double> &dqkv, std::vector<double> &mag) {
    const int hs = C / NH;
    const double scale = 1.0 / sqrt((double)hs);
    dqkv.assign((size_t)B * T * 3 * C, 0.0);
    mag.assign((size_t)B * T * 3 * C, 0.0);
    std::vector<double> p(T), pr(T), dp(T), ds(T), dsabs(T), vabs(hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const size_t qrow = ((size_t)b * T + i) * 3 * C + h * hs;
                const float *q = &qkv[qrow];
                const float *dO = &dout[((size_t)b * T + i) * C + h * hs];
                const double *o = &out[((size_t)b * T + i) * C + h * hs];
                const double L = lse[((size_t)b * NH + h) * T + i];
                double D = 0, Dabs = 0;
                for (int d = 0; d < hs; d++) {
                    D += (double)dO[d] * o[d];
                    vabs[d] = 0;
                }
                for (int j = 0; j <= i; j++) {
                    const float *k = &qkv[((size_t)b * T + j) * 3 * C + C + h * hs];
                    const float *v = k + C;
                    double s = 0, t = 0;
                    for (int d = 0; d < hs; d++) {
                        s += (double)q[d] * k[d];
                        t += (double)dO[d] * v[d];
                    }
                    p[j] = exp(s * scale - L);
                    dp[j] = t;
                    for (int d = 0; d < hs; d++) vabs[d] += p[j] * fabs((double)v[d]);
                }
                for (int d = 0; d < hs; d++) Dabs += fabs((double)dO[d]) * vabs[d];
                for (int j = 0; j <= i; j++) {
                    const double x = p[j] * (dp[j] - D) * scale;
                    pr[j] = emulate ? (double)bf2f(f2bf((float)p[j])) : p[j];
                    ds[j] = emulate ? (double)bf2f(f2bf((float)x)) : x;
                    dsabs[j] = p[j] * (fabs(dp[j]) + Dabs) * scale;
                }
                double *dq = &dqkv[qrow], *mq = &mag[qrow];
                for (int j = 0; j <= i; j++) {
                    const size_t krow = ((size_t)b * T + j) * 3 * C + C + h * hs;
                    const float *k = &qkv[krow];
                    double *dk = &dqkv[krow], *dv = dk + C, *mk = &mag[krow], *mv = mk + C;
                    for (int d = 0; d < hs; d++) {
                        dq[d] += ds[j] * k[d];
                        mq[d] += dsabs[j] * fabs((double)k[d]);
                        dk[d] += ds[j] * q[d];
                        mk[d] += dsabs[j] * fabs((double)q[d]);
                        dv[d] += pr[j] * dO[d];
                        mv[d] += p[j] * fabs((double)dO[d]);
                    }
                }
            }
}

/* An element passes when |gpu - ref| <= atol_frac * rms(ref) + rtol |ref| + kappa * mag. */
static void compare_bound(const char *name, const std::vector<float> &got, const std::vector<double> &ref,
                          const std::vector<double> &mag, double rtol, double atol_frac, double kappa) {
    const size_t n = ref.size();
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += ref[i] * ref[i];
    const double rms = n ? sqrt(ss / (double)n) : 0.0;
    const double atol = atol_frac * (rms > 0 ? rms : 1.0);
    double max_abs = 0, max_ratio = 0;
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - ref[i]);
        const double tol = atol + rtol * fabs(ref[i]) + kappa * mag[i];
        if (!(d <= tol)) {
            if (!bad) first_bad = i;
            bad++;
        }
        if (!(d <= max_abs)) max_abs = d;
        if (!(d / tol <= max_ratio)) max_ratio = d / tol;
    }
    printf("check %-34s %10.3e %10.3e %s (err/tol max; rtol %.0e, atol %.0e x rms %.3e, %.2g x mag; n %zu)", name,
           max_abs, max_ratio, bad ? "FAIL" : "PASS", rtol, atol_frac, rms, kappa, n);
    if (bad)
        printf(" %zu bad, first [%zu] gpu %.6g ref %.6g mag %.3g", bad, first_bad, (double)got[first_bad],
               ref[first_bad], mag[first_bad]);
    printf("\n");
    if (bad) g_fail++;
}

/*
 * Attention backward tolerances. The kernels round P and dS to bf16 (u = 2^-9
 * relative) before their tensor-core products, compute D from the bf16 out of
 * the forward (whose own error is at most ~3u of sum_j P|v|: P rounded, l summed
 * from the rounded P, out rounded) and round dQ, dK, dV to bf16. Against the
 * exact double reference an element's error is then bounded by u-multiples of
 * the sum of the sizes of its terms (mag), not of its value: the first key of a
 * sequence sums over all T queries, and its dK/dV can cancel to ~0 while its
 * terms do not (run 1's failures, both at key 0, were such elements: in
 * tolerance against mag). Bound: 1e-2 |ref| (the final rounding, u, x5) + 8u
 * mag (P u, lse u, D 3u, dS u, with margin) + 1e-3 rms (fp32 accumulation).
 * Against the bf16 emulation (same roundings, the GPU's out and lse) only the
 * final rounding, fp32 accumulation and rare one-ulp flips of a rounded P or dS
 * remain: 1e-2 |ref| + 2e-3 rms + u mag. A missing mask, a race or a wrong
 * scale moves whole terms, far outside either bound.
 */
static void check_attention_impl(const char *impl, const char *tag, sdc_attn kernels, int B, int T, int C, int NH,
                                 size_t scratch_bytes, bool must_repeat = true) {
    char name[128];
    std::vector<uint16_t> hqkv, hdo;
    std::vector<float> qkv, dout;
    rnd_bf16(hqkv, qkv, (size_t)B * T * 3 * C, 1.0f);
    rnd_bf16(hdo, dout, (size_t)B * T * C, 1.0f);
    Dev dqkv_in(hqkv.size() * 2), dout_d((size_t)B * T * C * 2), dlse((size_t)B * NH * T * 4),
        ddo(hdo.size() * 2), ddqkv(hqkv.size() * 2), scratch(scratch_bytes > 16 ? scratch_bytes : 16);
    up(dqkv_in, hqkv); up(ddo, hdo);
    CK(cudaMemsetAsync(dout_d.p, 0xff, dout_d.bytes, g_stream));
    CK(cudaMemsetAsync(dlse.p, 0xff, dlse.bytes, g_stream));
    int rc = sdc_attention_bf16(&g_ctx, kernels, dptr(dout_d.p), dptr(dlse.f()), dptr(dqkv_in.p), B, T, C, NH);
    if (rc != SD_OK) {
        printf("check attention %s %s FAIL: forward rc %d: %s\n", impl, tag, rc, sd_last_error());
        g_fail++;
        return;
    }
    std::vector<uint16_t> got_dq[2];
    for (int rep = 0; rep < 2; rep++) {
        CK(cudaMemsetAsync(ddqkv.p, 0xff, ddqkv.bytes, g_stream)); /* NaN: every element must be written */
        rc = sdc_attention_backward_bf16(&g_ctx, kernels, dptr(ddqkv.p), dptr(ddo.p), dptr(dqkv_in.p), dptr(dout_d.p),
                                         dptr(dlse.f()), B, T, C, NH, dptr(scratch.p));
        if (rc != SD_OK) {
            printf("check attention %s %s FAIL: backward rc %d: %s\n", impl, tag, rc, sd_last_error());
            g_fail++;
            return;
        }
        got_dq[rep] = down<uint16_t>(ddqkv, hqkv.size());
    }
    std::vector<double> ro, rl, rd, rmag, ed, emag;
    attention_fwd_ref(qkv, B, T, C, NH, ro, rl);
    const std::vector<float> gout = down_bf16(dout_d, ro.size());
    const std::vector<float> glse_f = down<float>(dlse, rl.size());
    snprintf(name, sizeof name, "attention_fwd.out %s %s", impl, tag);
    compare_v(name, gout, ro, 2e-2, 2e-2);
    snprintf(name, sizeof name, "attention_fwd.lse %s %s", impl, tag);
    compare_v(name, glse_f, rl, 1e-3, 1e-3);
    attention_bwd_ref(qkv, dout, ro, rl, B, T, C, NH, false, rd, rmag);
    std::vector<double> gout_d(gout.begin(), gout.end()), glse_d(glse_f.begin(), glse_f.end());
    attention_bwd_ref(qkv, dout, gout_d, glse_d, B, T, C, NH, true, ed, emag);
    std::vector<float> g(hqkv.size());
    for (size_t i = 0; i < g.size(); i++) g[i] = bf2f(got_dq[0][i]);
    snprintf(name, sizeof name, "attention_bwd.dqkv %s %s vs exact", impl, tag);
    compare_bound(name, g, rd, rmag, 1e-2, 1e-3, 1.0 / 64);
    snprintf(name, sizeof name, "attention_bwd.dqkv %s %s vs bf16-emul", impl, tag);
    compare_bound(name, g, ed, emag, 1e-2, 2e-3, 1.0 / 512);
    {   /* for the record: the old criterion (3e-2 |ref| + 3e-2 rms, exact reference) */
        size_t over = 0;
        double ss = 0;
        for (size_t i = 0; i < rd.size(); i++) ss += rd[i] * rd[i];
        const double atol = 3e-2 * sqrt(ss / (double)(rd.size() ? rd.size() : 1));
        for (size_t i = 0; i < rd.size(); i++)
            if (!(fabs(g[i] - rd[i]) <= atol + 3e-2 * fabs(rd[i]))) over++;
        printf("info attention_bwd.dqkv %s %s: %zu element(s) outside 3e-2|ref| + 3e-2 rms of the exact reference\n",
               impl, tag, over);
    }
    snprintf(name, sizeof name, "attention_bwd %s %s", impl, tag);
    if (must_repeat)
        repeat_check(name, got_dq[0].data(), got_dq[1].data(), hqkv.size() * 2);
    else
        printf("info %s: bits %s between two calls (this form does not promise it)\n", name,
               memcmp(got_dq[0].data(), got_dq[1].data(), hqkv.size() * 2) ? "differ" : "repeat");
}

/* An environment variable that a check sets for a while: the value the user
 * gave (or its absence) comes back when the guard goes out of scope. */
struct EnvGuard {
    const char *name;
    bool had;
    std::string was;
    explicit EnvGuard(const char *n) : name(n), had(getenv(n) != NULL), was(had ? getenv(n) : "") {}
    void set(const char *v) const { setenv(name, v, 1); }
    ~EnvGuard() {
        if (had) setenv(name, was.c_str(), 1);
        else unsetenv(name);
    }
};

/* the scratch our kernels need: the mma kernels' where they apply (D and
 * more), else the wmma kernels' (D) */
static size_t own_attention_scratch(int B, int T, int C, int NH) {
    const size_t mma = att_scratch_bytes(&g_ctx, SDC_ATTN_MMA, B, T, C, NH);
    return mma ? mma : att_scratch_bytes(&g_ctx, SDC_ATTN_WMMA, B, T, C, NH);
}

/* cuDNN's backward forms (sd_compute_attention_cudnn.cu): the default, det,
 * first: its bits must repeat; accum2's and accum's need not */
static const char *const g_cudnn_forms[3] = {"det", "accum2", "accum"};

static void check_attention(const char *tag, int B, int T, int C, int NH) {
    const uint64_t before = g_rng; /* every version sees the same data */
    const size_t own = own_attention_scratch(B, T, C, NH);
    check_attention_impl("wmma", tag, SDC_ATTN_WMMA, B, T, C, NH, own);
    const uint64_t after = g_rng;
    if (att_supported(&g_ctx, SDC_ATTN_MMA, B, T, C, NH)) {
        g_rng = before;
        check_attention_impl("mma", tag, SDC_ATTN_MMA, B, T, C, NH, own);
    } else {
        printf("info attention mma %s: shape not supported by the mma kernels (wmma only)\n", tag);
    }
    EnvGuard form("SYMDDP_CUDNN_BWD");
    for (int f = 0; f < 3; f++) {
        form.set(g_cudnn_forms[f]);
        char impl[32];
        snprintf(impl, sizeof impl, "cudnn-%s", g_cudnn_forms[f]);
        if (att_supported(&g_ctx, SDC_ATTN_CUDNN, B, T, C, NH)) {
            g_rng = before;
            check_attention_impl(impl, tag, SDC_ATTN_CUDNN, B, T, C, NH,
                                 att_scratch_bytes(&g_ctx, SDC_ATTN_CUDNN, B, T, C, NH), f == 0);
        } else {
            Dev dummy(256); /* not supported: the call fails before it reads them, with the reason */
            (void)sdc_attention_bf16(&g_ctx, SDC_ATTN_CUDNN, dptr(dummy.p), dptr(dummy.f()), dptr(dummy.p), B, T, C, NH);
#ifdef SD_WITH_CUDNN
            /* built with cuDNN, the default form must build: the entry
             * points would fall back to our kernels without a word */
            const bool must = f == 0;
#else
            const bool must = false;
#endif
            printf("%s attention %s %s: not available: %s\n", must ? "check FAIL:" : "info", impl, tag,
                   sd_last_error());
            if (must) g_fail++;
        }
    }
    g_rng = after;
}

/* ================= classifier ================= */
extern "C" int sdc_clsb_threads; /* sd_compute_loss.cu: the bf16 block size to time (0: the default) */

static void check_classifier(const char *tag, int N, int V, int Vp) {
    char name[96];
    std::vector<uint16_t> hl((size_t)N * Vp);
    std::vector<float> l((size_t)N * Vp);
    for (size_t i = 0; i < hl.size(); i++) {
        const int j = (int)(i % Vp);
        hl[i] = j < V ? f2bf(3.0f * rnd_normal()) : f2bf(1e4f); /* padding must not count */
        l[i] = bf2f(hl[i]);
    }
    std::vector<int32_t> tgt(N);
    for (int i = 0; i < N; i++) tgt[i] = (i % 13 == 5) ? -1 : (int32_t)(rnd_u32() % (uint32_t)V);
    const float dscale = 1.0f / (float)N;
    Dev dl(hl.size() * 2), dt(N * 4), dloss(N * 4);
    up(dl, hl); up(dt, tgt);
    SC(sdc_softmax_xent(&g_ctx, SDC_BF16, dptr(dl.p), dptr(dt.i()), N, V, Vp, dptr(dl.p), dscale, 0, 0, dptr(dloss.f())));
    std::vector<double> rloss(N), rg((size_t)N * Vp, 0.0);
    for (int i = 0; i < N; i++) {
        const float *x = &l[(size_t)i * Vp];
        double mx = -1e300;
        for (int j = 0; j < V; j++) mx = fmax(mx, (double)x[j]);
        double s = 0;
        for (int j = 0; j < V; j++) s += exp(x[j] - mx);
        const double lse = mx + log(s);
        if (tgt[i] < 0) {
            rloss[i] = 0;
            continue;
        }
        rloss[i] = lse - x[tgt[i]];
        for (int j = 0; j < V; j++) rg[(size_t)i * Vp + j] = (exp(x[j] - lse) - (j == tgt[i] ? 1.0 : 0.0)) * dscale;
    }
    for (int threads : {0, 512, 1024}) { /* the default block size (256), then the others gptcheck times */
        if (threads) {
            sdc_clsb_threads = threads;
            up(dl, hl);
            SC(sdc_softmax_xent(&g_ctx, SDC_BF16, dptr(dl.p), dptr(dt.i()), N, V, Vp, dptr(dl.p), dscale, 0, 0, dptr(dloss.f())));
            sdc_clsb_threads = 0;
        }
        const char *size = threads == 512 ? " (512 thr)" : threads ? " (1024 thr)" : "";
        snprintf(name, sizeof name, "classifier.loss %s%s", tag, size);
        compare_v(name, down<float>(dloss, N), rloss, 1e-4, 1e-4);
        snprintf(name, sizeof name, "classifier.dlogits %s%s", tag, size);
        compare_v(name, down_bf16(dl, rg.size()), rg, 1e-2, 1e-2);
    }
}

/* ================= adamw ================= */
static void check_adamw(const char *tag, int64_t n) {
    char name[96];
    const int64_t chunk = 4096;
    std::vector<float> p, g, m, v;
    rnd_f32(p, n, 0.5f);
    rnd_f32(g, n, 0.1f);
    rnd_f32(m, n, 0.01f);
    v.resize(n);
    for (int64_t i = 0; i < n; i++) v[i] = 1e-4f * rnd_uniform();
    const int64_t chunks = (n + chunk - 1) / chunk;
    std::vector<uint8_t> decay(chunks);
    for (int64_t c = 0; c < chunks; c++) decay[c] = (uint8_t)(c % 3 != 0);
    sdc_adamw_hyper h;
    memset(&h, 0, sizeof h);
    h.lr = 6e-4f; h.beta1 = 0.9f; h.beta2 = 0.95f; h.eps = 1e-8f; h.weight_decay = 0.1f; h.grad_scale = 0.5f; h.step = 3;
    Dev dp(n * 4), dpb(n * 2), dg(n * 4), dm(n * 4), dv(n * 4), dd(chunks), dh(sizeof h);
    up(dp, p); up(dg, g); up(dm, m); up(dv, v); up(dd, decay);
    CK(cudaMemcpy(dh.p, &h, sizeof h, cudaMemcpyHostToDevice));
    SC(sdc_adamw_bf16(&g_ctx, dptr(dp.f()), dptr(dpb.p), dptr(dg.f()), dptr(dm.f()), dptr(dv.f()), dptr(dd.p), chunk, n, dptr(dh.p)));
    std::vector<double> rp(n), rm(n), rv(n);
    const double bc1 = 1 - pow(0.9, 3), bc2 = 1 - pow(0.95, 3);
    for (int64_t i = 0; i < n; i++) {
        const double gi = (double)g[i] * 0.5;
        double pi = p[i];
        if (decay[i / chunk]) pi *= 1 - 6e-4 * 0.1;
        rm[i] = 0.9 * m[i] + 0.1 * gi;
        rv[i] = 0.95 * v[i] + 0.05 * gi * gi;
        pi -= (6e-4 / bc1) * rm[i] / (sqrt(rv[i]) / sqrt(bc2) + 1e-8);
        rp[i] = pi;
    }
    snprintf(name, sizeof name, "adamw.params %s", tag);
    compare_v(name, down<float>(dp, n), rp, 1e-5, 1e-6);
    snprintf(name, sizeof name, "adamw.m %s", tag);
    compare_v(name, down<float>(dm, n), rm, 1e-5, 1e-6);
    snprintf(name, sizeof name, "adamw.v %s", tag);
    compare_v(name, down<float>(dv, n), rv, 1e-5, 1e-6);
    snprintf(name, sizeof name, "adamw.params_bf16 %s", tag);
    compare_v(name, down_bf16(dpb, n), rp, 1e-2, 1e-3);
}

/* ================= GEMM ================= */
static cublasLtHandle_t g_lt;
static Dev *g_ws;
#define WS_BYTES ((size_t)64 << 20)

static sdc_handle plan(int m, int n, int k, int ta, int tb, int ctype, int btype, int epi, int acc, int batch = 1,
                      int64_t sa = 0, int64_t sb = 0, int64_t sc = 0) {
    sdc_bf16_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = m; d.n = n; d.k = k; d.trans_a = ta; d.trans_b = tb; d.batch = batch;
    d.stride_a = sa; d.stride_b = sb; d.stride_c = sc;
    d.c_type = ctype; d.bias_type = btype; d.epilogue = epi; d.accumulate = acc;
    d.workspace_bytes = (int64_t)WS_BYTES;
    sdc_handle p = 0;
    if (sdc_bf16_gemm_create(&g_ctx, &d, &p) != SD_OK) {
        printf("plan m=%d n=%d k=%d %c%c epi %d: %s\n", m, n, k, ta ? 'T' : 'N', tb ? 'T' : 'N', epi, sd_last_error());
        return 0;
    }
    return p;
}

/* ref (m,n) = op(A) op(B), A, B given as stored floats */
static void gemm_ref(std::vector<double> &c, const std::vector<float> &a, const std::vector<float> &b, int m, int n,
                     int k, int ta, int tb) {
    c.assign((size_t)m * n, 0.0);
    std::vector<double> bt((size_t)n * k); /* B^T: [n][k] */
    for (int kk = 0; kk < k; kk++)
        for (int j = 0; j < n; j++) bt[(size_t)j * k + kk] = tb ? b[(size_t)j * k + kk] : b[(size_t)kk * n + j];
    std::vector<double> ar(k);
    for (int i = 0; i < m; i++) {
        for (int kk = 0; kk < k; kk++) ar[kk] = ta ? a[(size_t)kk * m + i] : a[(size_t)i * k + kk];
        for (int j = 0; j < n; j++) {
            const double *bj = &bt[(size_t)j * k];
            double s = 0;
            for (int kk = 0; kk < k; kk++) s += ar[kk] * bj[kk];
            c[(size_t)i * n + j] = s;
        }
    }
}

static void check_gemm(const char *tag, int m, int n, int k) {
    char name[128];
    /* forward Linear with bias: C (m,n) = A (m,k) W^T, W (n,k), bias bf16 */
    std::vector<uint16_t> ha, hw, hbias, hdo;
    std::vector<float> a, w, bias, dout;
    rnd_bf16(ha, a, (size_t)m * k, 1.0f);
    rnd_bf16(hw, w, (size_t)n * k, 0.05f);
    rnd_bf16(hbias, bias, n, 0.5f);
    rnd_bf16(hdo, dout, (size_t)m * n, 1.0f);
    Dev da(ha.size() * 2), dw(hw.size() * 2), dbias(n * 2), dc((size_t)m * n * 4), daux((size_t)m * n * 2),
        ddo(hdo.size() * 2);
    up(da, ha); up(dw, hw); up(dbias, hbias); up(ddo, hdo);
    std::vector<double> ref;
    gemm_ref(ref, a, w, m, n, k, 0, 1);

    if (sdc_handle p = plan(m, n, k, 0, 1, SDC_BF16, SDC_BF16, SDC_BEPI_NONE, 0)) {
        SC(sdc_bf16_gemm_run(&g_ctx, p, dptr(dc.p), dptr(da.p), dptr(dw.p), 0, 0, dptr(g_ws->p)));
        snprintf(name, sizeof name, "gemm NT none bf16 %s", tag);
        compare_v(name, down_bf16(dc, ref.size()), ref, 1e-2, 1e-2);
        sdc_bf16_gemm_destroy(p);
    } else g_fail++;

    std::vector<double> rb(ref);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) rb[(size_t)i * n + j] += bias[j];
    if (sdc_handle p = plan(m, n, k, 0, 1, SDC_BF16, SDC_BF16, SDC_BEPI_BIAS, 0)) {
        SC(sdc_bf16_gemm_run(&g_ctx, p, dptr(dc.p), dptr(da.p), dptr(dw.p), dptr(dbias.p), 0, dptr(g_ws->p)));
        snprintf(name, sizeof name, "gemm NT bias %s", tag);
        compare_v(name, down_bf16(dc, ref.size()), rb, 1e-2, 1e-2);
        sdc_bf16_gemm_destroy(p);
    } else g_fail++;

    /* the residual add: d = A W^T + bias + c, c read in place of a copy into d */
    if (sdc_handle p = plan(m, n, k, 0, 1, SDC_BF16, SDC_BF16, SDC_BEPI_BIAS, 1)) {
        std::vector<uint16_t> hr;
        std::vector<float> r;
        rnd_bf16(hr, r, (size_t)m * n, 1.0f);
        Dev dr(hr.size() * 2);
        up(dr, hr);
        SC(sdc_bf16_gemm_run_into(&g_ctx, p, dptr(dc.p), dptr(dr.p), dptr(da.p), dptr(dw.p), dptr(dbias.p), 0, dptr(g_ws->p)));
        std::vector<double> rr(rb);
        for (size_t i = 0; i < rr.size(); i++) rr[i] += r[i];
        snprintf(name, sizeof name, "gemm NT bias run_into (residual) %s", tag);
        compare_v(name, down_bf16(dc, ref.size()), rr, 1e-2, 1e-2);
        const std::vector<uint16_t> kept = down<uint16_t>(dr, hr.size());
        snprintf(name, sizeof name, "gemm run_into leaves c %s", tag);
        repeat_check(name, kept.data(), hr.data(), hr.size() * 2);
        sdc_bf16_gemm_destroy(p);
    } else g_fail++;

    /* GELU_AUX_BIAS: C = gelu(pre), aux = pre */
    std::vector<double> rg(rb.size());
    for (size_t i = 0; i < rb.size(); i++) rg[i] = gelu_ref(rb[i]);
    if (sdc_handle p = plan(m, n, k, 0, 1, SDC_BF16, SDC_BF16, SDC_BEPI_GELU_AUX_BIAS, 0)) {
        SC(sdc_bf16_gemm_run(&g_ctx, p, dptr(dc.p), dptr(da.p), dptr(dw.p), dptr(dbias.p), dptr(daux.p), dptr(g_ws->p)));
        snprintf(name, sizeof name, "gemm NT gelu+aux+bias out %s", tag);
        compare_v(name, down_bf16(dc, ref.size()), rg, 1e-2, 1e-2);
        snprintf(name, sizeof name, "gemm NT gelu+aux+bias aux %s", tag);
        compare_v(name, down_bf16(daux, ref.size()), rb, 1e-2, 1e-2);
        sdc_bf16_gemm_destroy(p);
    } else g_fail++;

    /* DGELU: dpre (m,n) = dH (m,k') W2 (k',n) * gelu'(aux); here dH = dout2 (m,k), W2 = w stored (n,k)^T ... use
       B = w^T by trans_b: dH (m,k) x w^T -> (m,n), then * gelu'(pre) with pre from the aux just written */
    std::vector<float> pre = down_bf16(daux, rb.size());
    if (sdc_handle p = plan(m, n, k, 0, 1, SDC_BF16, SDC_BF16, SDC_BEPI_DGELU, 0)) {
        SC(sdc_bf16_gemm_run(&g_ctx, p, dptr(dc.p), dptr(da.p), dptr(dw.p), 0, dptr(daux.p), dptr(g_ws->p)));
        std::vector<double> rd(ref.size());
        for (size_t i = 0; i < ref.size(); i++) rd[i] = ref[i] * gelu_grad_ref(pre[i]);
        snprintf(name, sizeof name, "gemm NT dgelu %s", tag);
        compare_v(name, down_bf16(dc, ref.size()), rd, 1e-2, 1e-2);
        sdc_bf16_gemm_destroy(p);
    } else g_fail++;

    /* weight gradient with the bias gradient: dW (n,k) += dout^T (n,m) A (m,k), db (n) = column sums of dout */
    std::vector<float> w0;
    rnd_f32(w0, (size_t)n * k, 0.1f);
    Dev dgw(w0.size() * 4), dgb(n * 4);
    up(dgw, w0);
    if (sdc_handle p = plan(n, k, m, 1, 0, SDC_F32, SDC_F32, SDC_BEPI_BGRAD_A, 1)) {
        SC(sdc_bf16_gemm_run(&g_ctx, p, dptr(dgw.p), dptr(ddo.p), dptr(da.p), dptr(dgb.p), 0, dptr(g_ws->p)));
        std::vector<double> rw;
        gemm_ref(rw, dout, a, n, k, m, 1, 0);
        for (size_t i = 0; i < rw.size(); i++) rw[i] += w0[i];
        std::vector<double> rbg(n, 0.0);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) rbg[j] += dout[(size_t)i * n + j];
        snprintf(name, sizeof name, "gemm TN dW fp32 accumulate %s", tag);
        compare_v(name, down<float>(dgw, rw.size()), rw, 1e-4, 1e-4);
        snprintf(name, sizeof name, "gemm TN bgrad-a fp32 %s", tag);
        compare_v(name, down<float>(dgb, n), rbg, 1e-4, 1e-4);
        sdc_bf16_gemm_destroy(p);
    } else g_fail++;

    /* input gradient: dA (m,k) = dout (m,n) W (n,k), no transposes */
    if (sdc_handle p = plan(m, k, n, 0, 0, SDC_BF16, SDC_BF16, SDC_BEPI_NONE, 0)) {
        Dev dda((size_t)m * k * 2);
        SC(sdc_bf16_gemm_run(&g_ctx, p, dptr(dda.p), dptr(ddo.p), dptr(dw.p), 0, 0, dptr(g_ws->p)));
        std::vector<double> rda;
        gemm_ref(rda, dout, w, m, k, n, 0, 0);
        snprintf(name, sizeof name, "gemm NN dinp %s", tag);
        compare_v(name, down_bf16(dda, rda.size()), rda, 1e-2, 1e-2);
        sdc_bf16_gemm_destroy(p);
    } else g_fail++;

    /* DGELU_BGRAD (not needed by the GPT step: reported, never a failure when cuBLASLt lacks it) */
    {
        Dev dbg(n * 2);
        sdc_bf16_gemm_desc d;
        memset(&d, 0, sizeof d);
        d.m = m; d.n = n; d.k = k; d.trans_b = 1; d.batch = 1; d.c_type = SDC_BF16; d.bias_type = SDC_BF16;
        d.epilogue = SDC_BEPI_DGELU_BGRAD; d.workspace_bytes = (int64_t)WS_BYTES;
        sdc_handle p = 0;
        if (sdc_bf16_gemm_create(&g_ctx, &d, &p) == SD_OK) {
            SC(sdc_bf16_gemm_run(&g_ctx, p, dptr(dc.p), dptr(da.p), dptr(dw.p), dptr(dbg.p), dptr(daux.p), dptr(g_ws->p)));
            std::vector<double> rd(ref.size()), rbg(n, 0.0);
            for (size_t i = 0; i < ref.size(); i++) rd[i] = ref[i] * gelu_grad_ref(pre[i]);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) rbg[j] += rd[(size_t)i * n + j];
            snprintf(name, sizeof name, "gemm NT dgelu+bgrad %s", tag);
            compare_v(name, down_bf16(dc, ref.size()), rd, 1e-2, 1e-2);
            snprintf(name, sizeof name, "gemm NT dgelu+bgrad bias %s", tag);
            compare_v(name, down_bf16(dbg, n), rbg, 2e-2, 2e-2);
            sdc_bf16_gemm_destroy(p);
        } else {
            printf("info gemm dgelu+bgrad bf16 %s: not available (%s)\n", tag, sd_last_error());
        }
    }
}

static void check_gemm_batched(const char *tag, int batch, int m, int n, int k) {
    char name[96];
    std::vector<uint16_t> ha, hb;
    std::vector<float> a, b;
    rnd_bf16(ha, a, (size_t)batch * m * k, 1.0f);
    rnd_bf16(hb, b, (size_t)batch * k * n, 1.0f);
    Dev da(ha.size() * 2), db(hb.size() * 2), dc((size_t)batch * m * n * 2);
    up(da, ha); up(db, hb);
    sdc_handle p = plan(m, n, k, 0, 0, SDC_BF16, SDC_BF16, SDC_BEPI_NONE, 0, batch, (int64_t)m * k, (int64_t)k * n,
                       (int64_t)m * n);
    if (!p) {
        g_fail++;
        return;
    }
    SC(sdc_bf16_gemm_run(&g_ctx, p, dptr(dc.p), dptr(da.p), dptr(db.p), 0, 0, dptr(g_ws->p)));
    std::vector<double> ref;
    for (int z = 0; z < batch; z++) {
        std::vector<float> az(a.begin() + (size_t)z * m * k, a.begin() + (size_t)(z + 1) * m * k);
        std::vector<float> bz(b.begin() + (size_t)z * k * n, b.begin() + (size_t)(z + 1) * k * n);
        std::vector<double> cz;
        gemm_ref(cz, az, bz, m, n, k, 0, 0);
        ref.insert(ref.end(), cz.begin(), cz.end());
    }
    snprintf(name, sizeof name, "gemm NN batched x%d %s", batch, tag);
    compare_v(name, down_bf16(dc, ref.size()), ref, 1e-2, 1e-2);
    sdc_bf16_gemm_destroy(p);
}

/* ================= bias gradient ================= */
static void check_bias(const char *tag, int N, int OC) {
    char name[96];
    std::vector<uint16_t> hd;
    std::vector<float> d, b0;
    rnd_bf16(hd, d, (size_t)N * OC, 1.0f);
    rnd_f32(b0, OC, 1.0f);
    Dev dd(hd.size() * 2), db(OC * 4), scratch(bias_scratch_bytes(N, OC));
    up(dd, hd);
    std::vector<float> got[2];
    for (int rep = 0; rep < 2; rep++) {
        up(db, b0);
        SC(sdc_bias_act_backward(&g_ctx, SDC_BF16, dptr(dd.p), 0, N, OC, dptr(db.f()), SDC_IDENTITY, 0, dptr(scratch.p)));
        got[rep] = down<float>(db, OC);
    }
    std::vector<double> ref(OC, 0.0); /* written: b0 is overwritten */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < OC; j++) ref[j] += d[(size_t)i * OC + j];
    snprintf(name, sizeof name, "bias_bwd %s", tag);
    compare_v(name, got[0], ref, 1e-4, 1e-4);
    repeat_check(name, got[0].data(), got[1].data(), OC * 4);
}

/* ================= timings at GPT-2 124M shapes ================= */
static void fill_bf16(Dev &d, size_t n, float sd) {
    std::vector<uint16_t> h(n);
    for (size_t i = 0; i < n; i++) h[i] = f2bf(sd * rnd_normal());
    up(d, h);
}

static void time_gemm(const char *name, int m, int n, int k, int ta, int tb, int ctype, int epi, int acc, void *a,
                      void *b, void *c, void *bias, void *aux) {
    sdc_handle p = plan(m, n, k, ta, tb, ctype, ctype == SDC_F32 ? SDC_F32 : SDC_BF16, epi, acc);
    if (!p) {
        g_fail++;
        return;
    }
    const double us = time_us([&] { SC(sdc_bf16_gemm_run(&g_ctx, p, dptr(c), dptr(a), dptr(b), dptr(bias), dptr(aux), dptr(g_ws->p))); }, 20);
    report_fl(name, us, 2.0 * m * n * k);
    /* the fastest of cuBLASLt's first 8 algorithms, timed there */
    SC(sdc_bf16_gemm_tune(&g_ctx, p, dptr(c), dptr(a), dptr(b), dptr(bias), dptr(aux), dptr(g_ws->p), 8, 10));
    const double tuned = time_us([&] { SC(sdc_bf16_gemm_run(&g_ctx, p, dptr(c), dptr(a), dptr(b), dptr(bias), dptr(aux), dptr(g_ws->p))); }, 20);
    char label[160];
    snprintf(label, sizeof label, "%s, tuned (tune: %.1f -> %.1f us)", name, tuned_ns(p, 0) / 1e3,
             tuned_ns(p, 1) / 1e3);
    report_fl(label, tuned, 2.0 * m * n * k);
    sdc_bf16_gemm_destroy(p);
}

static void timings() {
    const int B = 16, T = 1024, C = 768, NH = 12, V = 50304, Vp = 50304;
    const int N = B * T;
    printf("---- timings, GPT-2 124M shapes: B=%d T=%d C=%d NH=%d V=%d ----\n", B, T, C, NH, V);
    {
        Dev x((size_t)N * C * 2), y((size_t)N * C * 2), w(C * 2), b(C * 2), mean(N * 4), rstd(N * 4), dy((size_t)N * C * 2),
            dx((size_t)N * C * 2), dw(C * 4), db(C * 4), scratch(ln_scratch_bytes(N, C));
        fill_bf16(x, (size_t)N * C, 1.f); fill_bf16(w, C, 1.f); fill_bf16(b, C, 1.f); fill_bf16(dy, (size_t)N * C, 1.f);
        CK(cudaMemset(dx.p, 0, dx.bytes)); CK(cudaMemset(dw.p, 0, dw.bytes)); CK(cudaMemset(db.p, 0, db.bytes));
        for (int generic = 0; generic < 2; generic++) {
            sdc_lnb_force_generic = generic;
            double us = time_us([&] { SC(sdc_layer_norm(&g_ctx, SDC_BF16, dptr(y.p), dptr(mean.f()), dptr(rstd.f()), dptr(x.p), dptr(w.p), dptr(b.p), N, C, 1e-5f)); }, 50);
            report_bw(generic ? "layernorm_fwd, generic form" : "layernorm_fwd (N=16384, C=768)", us, 2.0 * N * C * 2);
        }
        sdc_lnb_force_generic = 0;
        const double us = time_us([&] {
            SC(sdc_layer_norm_backward(&g_ctx, SDC_BF16, dptr(dx.p), dptr(dw.f()), dptr(db.f()), dptr(dy.p), dptr(x.p), dptr(w.p), dptr(mean.f()), dptr(rstd.f()), N, C, 1, dptr(scratch.p)));
        }, 50);
        report_bw("layernorm_bwd", us, 4.0 * N * C * 2);
    }
    {
        const int64_t n = (int64_t)N * 4 * C;
        Dev x(n * 2), y(n * 2), d(n * 2);
        fill_bf16(x, n, 1.f); fill_bf16(d, n, 1.f);
        double us = time_us([&] { SC(sdc_gelu(&g_ctx, SDC_BF16, dptr(y.p), dptr(x.p), n)); }, 50);
        report_bw("gelu_fwd (16384 x 3072)", us, 2.0 * n * 2);
        us = time_us([&] { SC(sdc_gelu_backward(&g_ctx, SDC_BF16, dptr(d.p), dptr(d.p), dptr(x.p), n)); }, 50);
        report_bw("gelu_bwd (in place)", us, 3.0 * n * 2);
    }
    {
        std::vector<int32_t> tok(N);
        for (int i = 0; i < N; i++) tok[i] = (int32_t)(rnd_u32() % 50257u);
        Dev dt(N * 4), wte((size_t)V * C * 2), wpe((size_t)T * C * 2), out((size_t)N * C * 2), dwte((size_t)V * C * 4),
            dwpe((size_t)T * C * 4);
        const size_t sb = embed_scratch_bytes(B, T, V);
        Dev scratch(sb);
        up(dt, tok);
        fill_bf16(wte, (size_t)V * C, 0.1f); fill_bf16(wpe, (size_t)T * C, 0.1f); fill_bf16(out, (size_t)N * C, 1.f);
        CK(cudaMemset(dwte.p, 0, dwte.bytes)); CK(cudaMemset(dwpe.p, 0, dwpe.bytes));
        double us = time_us([&] { SC(sdc_embed_bf16(&g_ctx, dptr(out.p), dptr(dt.i()), dptr(wte.p), dptr(wpe.p), B, T, C)); }, 50);
        report_bw("embed_fwd", us, 3.0 * N * C * 2);
        us = time_us([&] { SC(sdc_embed_backward_bf16(&g_ctx, dptr(dwte.f()), dptr(dwpe.f()), dptr(out.p), dptr(dt.i()), B, T, C, V, dptr(scratch.p), (int64_t)sb)); }, 20);
        report_bw("embed_bwd (sort + wte + wpe)", us, 2.0 * N * C * 2 + (double)N * C * 8);
    }
    {
        Dev qkv((size_t)N * 3 * C * 2), out((size_t)N * C * 2), lse((size_t)B * NH * T * 4), dout((size_t)N * C * 2),
            dqkv((size_t)N * 3 * C * 2), scratch(own_attention_scratch(B, T, C, NH));
        fill_bf16(qkv, (size_t)N * 3 * C, 1.f); fill_bf16(dout, (size_t)N * C, 1.f);
        const double fwd_flops = 4.0 * B * NH * (double)T * T * (C / NH) / 2.0; /* causal half */
        struct { const char *name; sdc_attn kernels; } impls[2] = {{"wmma", SDC_ATTN_WMMA}, {"mma", SDC_ATTN_MMA}};
        for (int v = 0; v < 2; v++) {
            if (v == 1 && !att_supported(&g_ctx, SDC_ATTN_MMA, B, T, C, NH)) continue;
            char nm[96];
            double us = time_us([&] { SC(sdc_attention_bf16(&g_ctx, impls[v].kernels, dptr(out.p), dptr(lse.f()), dptr(qkv.p), B, T, C, NH)); }, 20);
            snprintf(nm, sizeof nm, "attention_fwd %s (causal FLOPs)", impls[v].name);
            report_fl(nm, us, fwd_flops);
            us = time_us([&] {
                SC(sdc_attention_backward_bf16(&g_ctx, impls[v].kernels, dptr(dqkv.p), dptr(dout.p), dptr(qkv.p), dptr(out.p), dptr(lse.f()), B, T, C, NH, dptr(scratch.p)));
            }, 20);
            snprintf(nm, sizeof nm, "attention_bwd %s (2.5x fwd FLOPs)", impls[v].name);
            report_fl(nm, us, 2.5 * fwd_flops);
        }
        {
        EnvGuard form("SYMDDP_CUDNN_BWD");
        for (int f = 0; f < 3; f++) {
            form.set(g_cudnn_forms[f]);
            if (!att_supported(&g_ctx, SDC_ATTN_CUDNN, B, T, C, NH)) continue;
            Dev cs(att_scratch_bytes(&g_ctx, SDC_ATTN_CUDNN, B, T, C, NH));
            char nm[96];
            double us = time_us([&] { SC(sdc_attention_bf16(&g_ctx, SDC_ATTN_CUDNN, dptr(out.p), dptr(lse.f()), dptr(qkv.p), B, T, C, NH)); }, 20);
            snprintf(nm, sizeof nm, "attention_fwd cudnn (causal FLOPs)");
            if (f == 0) report_fl(nm, us, fwd_flops);
            us = time_us([&] {
                SC(sdc_attention_backward_bf16(&g_ctx, SDC_ATTN_CUDNN, dptr(dqkv.p), dptr(dout.p), dptr(qkv.p), dptr(out.p), dptr(lse.f()), B, T, C, NH, dptr(cs.p)));
            }, 20);
            snprintf(nm, sizeof nm, "attention_bwd cudnn-%s (2.5x fwd FLOPs, scratch %.0f MB)", g_cudnn_forms[f],
                     cs.bytes / 1e6);
            report_fl(nm, us, 2.5 * fwd_flops);
            /* the default form's bits must repeat over many calls */
            const size_t n3 = (size_t)N * 3 * C;
            const int reps = f == 0 ? 50 : 2;
            std::vector<uint16_t> first, again;
            int differ = 0;
            for (int rep = 0; rep < reps; rep++) {
                CK(cudaMemsetAsync(dqkv.p, 0xff, dqkv.bytes, g_stream));
                SC(sdc_attention_backward_bf16(&g_ctx, SDC_ATTN_CUDNN, dptr(dqkv.p), dptr(dout.p), dptr(qkv.p), dptr(out.p), dptr(lse.f()), B, T, C, NH, dptr(cs.p)));
                (rep == 0 ? first : again) = down<uint16_t>(dqkv, n3);
                if (rep > 0 && memcmp(first.data(), again.data(), n3 * 2) != 0) differ++;
            }
            snprintf(nm, sizeof nm, "attention_bwd cudnn-%s B=16 T=1024, %d calls", g_cudnn_forms[f], reps);
            if (f == 0) {
                printf("repeat %-40s %d of %d calls differ from the first %s\n", nm, differ, reps - 1,
                       differ ? "FAIL" : "PASS");
                if (differ) g_fail++;
            } else {
                printf("info %s: %d of %d calls differ from the first\n", nm, differ, reps - 1);
            }
        }
        } /* the user's SYMDDP_CUDNN_BWD is back */
        if (att_supported(&g_ctx, SDC_ATTN_MMA, B, T, C, NH)) {
            /* at this size too the mma backward's bits must repeat, and agree
             * with the wmma kernels' within bf16 rounding */
            const size_t n3 = (size_t)N * 3 * C;
            std::vector<uint16_t> got[2];
            SC(sdc_attention_bf16(&g_ctx, SDC_ATTN_MMA, dptr(out.p), dptr(lse.f()), dptr(qkv.p), B, T, C, NH));
            for (int rep = 0; rep < 2; rep++) {
                CK(cudaMemsetAsync(dqkv.p, 0xff, dqkv.bytes, g_stream));
                SC(sdc_attention_backward_bf16(&g_ctx, SDC_ATTN_MMA, dptr(dqkv.p), dptr(dout.p), dptr(qkv.p), dptr(out.p), dptr(lse.f()), B, T, C, NH, dptr(scratch.p)));
                got[rep] = down<uint16_t>(dqkv, n3);
            }
            repeat_check("attention_bwd mma B=16 T=1024", got[0].data(), got[1].data(), n3 * 2);
            SC(sdc_attention_bf16(&g_ctx, SDC_ATTN_WMMA, dptr(out.p), dptr(lse.f()), dptr(qkv.p), B, T, C, NH));
            SC(sdc_attention_backward_bf16(&g_ctx, SDC_ATTN_WMMA, dptr(dqkv.p), dptr(dout.p), dptr(qkv.p), dptr(out.p), dptr(lse.f()), B, T, C, NH, dptr(scratch.p)));
            const std::vector<uint16_t> w = down<uint16_t>(dqkv, n3);
            double ss = 0, worst = 0;
            size_t over = 0;
            for (size_t i = 0; i < n3; i++) ss += (double)bf2f(w[i]) * bf2f(w[i]);
            const double rms = sqrt(ss / (double)n3);
            for (size_t i = 0; i < n3; i++) {
                const double d = fabs((double)bf2f(got[0][i]) - bf2f(w[i]));
                if (!(d <= 3e-2 * fabs(bf2f(w[i])) + 3e-2 * rms)) over++;
                if (!(d <= worst)) worst = d;
            }
            /* the B=1 checks above see a few in a million outside this band
             * against the exact reference; a lost or doubled part of dQ moves
             * whole rows by about their rms */
            const bool ok = worst <= 0.5 * rms && over <= n3 / 100000;
            printf("check attention_bwd mma vs wmma B=16 T=1024 %s: largest difference %.3g (rms %.3g), %zu of %zu "
                   "outside 3e-2|ref| + 3e-2 rms\n",
                   ok ? "PASS" : "FAIL", worst, rms, over, n3);
            if (!ok) g_fail++;
        }
    }
    {
        Dev logits((size_t)N * Vp * 2), tgt(N * 4), loss(N * 4);
        fill_bf16(logits, (size_t)N * Vp, 2.f);
        std::vector<int32_t> t(N);
        for (int i = 0; i < N; i++) t[i] = (int32_t)(rnd_u32() % (uint32_t)V);
        up(tgt, t);
        double us = time_us([&] { SC(sdc_softmax_xent(&g_ctx, SDC_BF16, dptr(logits.p), dptr(tgt.i()), N, V, Vp, dptr(logits.p), 1.f / N, 0, 0, dptr(loss.f()))); }, 10);
        report_bw("classifier (fwd+bwd, in place, 256 threads a block)", us, 3.0 * N * Vp * 2);
        /* the other block sizes: rows in flight per SM against threads per row */
        for (int threads : {512, 1024}) {
            sdc_clsb_threads = threads;
            us = time_us([&] { SC(sdc_softmax_xent(&g_ctx, SDC_BF16, dptr(logits.p), dptr(tgt.i()), N, V, Vp, dptr(logits.p), 1.f / N, 0, 0, dptr(loss.f()))); }, 10);
            char label[64];
            snprintf(label, sizeof label, "classifier, %d threads a block", threads);
            report_bw(label, us, 3.0 * N * Vp * 2);
        }
        sdc_clsb_threads = 0;
    }
    {
        const int64_t n = 124475904; /* GPT-2 124M with the padded vocabulary */
        Dev p(n * 4), pb(n * 2), g(n * 4), m(n * 4), v(n * 4), hd(sizeof(sdc_adamw_hyper));
        CK(cudaMemset(p.p, 0, p.bytes)); CK(cudaMemset(g.p, 0, g.bytes));
        CK(cudaMemset(m.p, 0, m.bytes)); CK(cudaMemset(v.p, 0, v.bytes));
        sdc_adamw_hyper h;
        memset(&h, 0, sizeof h);
        h.lr = 6e-4f; h.beta1 = 0.9f; h.beta2 = 0.95f; h.eps = 1e-8f; h.weight_decay = 0.1f; h.grad_scale = 1.f; h.step = 1;
        CK(cudaMemcpy(hd.p, &h, sizeof h, cudaMemcpyHostToDevice));
        double us = time_us([&] {
            SC(sdc_adamw_bf16(&g_ctx, dptr(p.f()), dptr(pb.p), dptr(g.f()), dptr(m.f()), dptr(v.f()), 0, 0, n, dptr(hd.p)));
        }, 10);
        report_bw("adamw (124M params)", us, 30.0 * n);
    }
    {
        Dev d((size_t)N * 4 * C * 2), db(4 * C * 4), scratch(bias_scratch_bytes(N, 4 * C));
        fill_bf16(d, (size_t)N * 4 * C, 1.f);
        CK(cudaMemset(db.p, 0, db.bytes));
        double us = time_us([&] { SC(sdc_bias_act_backward(&g_ctx, SDC_BF16, dptr(d.p), 0, N, 4 * C, dptr(db.f()), SDC_IDENTITY, 0, dptr(scratch.p))); }, 50);
        report_bw("bias_bwd (16384 x 3072)", us, 2.0 * N * 4 * C);
        us = time_us([&] { SC(sdc_bias_act_backward(&g_ctx, SDC_BF16, dptr(d.p), 0, N, C, dptr(db.f()), SDC_IDENTITY, 0, dptr(scratch.p))); }, 50);
        report_bw("bias_bwd (16384 x 768)", us, 2.0 * N * C);
    }
    {
        Dev x((size_t)N * 4 * C * 2), w((size_t)Vp * C * 2), y((size_t)N * Vp * 2), bias(4 * C * 2), aux((size_t)N * 4 * C * 2),
            gw((size_t)Vp * C * 4), gb(4 * C * 4);
        fill_bf16(x, (size_t)N * 4 * C, 1.f); fill_bf16(w, (size_t)Vp * C, 0.02f); fill_bf16(bias, 4 * C, 0.1f);
        fill_bf16(aux, (size_t)N * 4 * C, 1.f);
        CK(cudaMemset(gw.p, 0, gw.bytes));
        time_gemm("gemm qkv fwd 16384x2304x768 bias", N, 3 * C, C, 0, 1, SDC_BF16, SDC_BEPI_BIAS, 0, x.p, w.p, y.p, bias.p, NULL);
        time_gemm("gemm attproj fwd 16384x768x768 bias", N, C, C, 0, 1, SDC_BF16, SDC_BEPI_BIAS, 0, x.p, w.p, y.p, bias.p, NULL);
        time_gemm("gemm fc fwd 16384x3072x768 gelu+aux", N, 4 * C, C, 0, 1, SDC_BF16, SDC_BEPI_GELU_AUX_BIAS, 0, x.p, w.p, y.p, bias.p, aux.p);
        time_gemm("gemm fcproj fwd 16384x768x3072 bias", N, C, 4 * C, 0, 1, SDC_BF16, SDC_BEPI_BIAS, 0, x.p, w.p, y.p, bias.p, NULL);
        time_gemm("gemm lm_head fwd 16384x50304x768", N, Vp, C, 0, 1, SDC_BF16, SDC_BEPI_NONE, 0, x.p, w.p, y.p, NULL, NULL);
        time_gemm("gemm fcproj dinp 16384x3072x768 dgelu", N, 4 * C, C, 0, 0, SDC_BF16, SDC_BEPI_DGELU, 0, x.p, w.p, y.p, NULL, aux.p);
        /* the MLP's bias gradient (bf16) in the same GEMM's epilogue, against dgelu + bias_bwd (16384 x 3072) */
        time_gemm("gemm fcproj dinp 16384x3072x768 dgelu+bgrad", N, 4 * C, C, 0, 0, SDC_BF16, SDC_BEPI_DGELU_BGRAD, 0, x.p, w.p, y.p, bias.p, aux.p);
        time_gemm("gemm qkv dinp 16384x768x2304", N, C, 3 * C, 0, 0, SDC_BF16, SDC_BEPI_NONE, 0, x.p, w.p, y.p, NULL, NULL);
        time_gemm("gemm qkv dW 2304x768x16384 bgrad", 3 * C, C, N, 1, 0, SDC_F32, SDC_BEPI_BGRAD_A, 1, x.p, w.p, gw.p, gb.p, NULL);
        time_gemm("gemm fc dW 3072x768x16384 bgrad", 4 * C, C, N, 1, 0, SDC_F32, SDC_BEPI_BGRAD_A, 1, x.p, w.p, gw.p, gb.p, NULL);
        time_gemm("gemm lm_head dinp 16384x768x50304", N, C, Vp, 0, 0, SDC_BF16, SDC_BEPI_NONE, 0, y.p, w.p, x.p, NULL, NULL);
        time_gemm("gemm lm_head dW 50304x768x16384", Vp, C, N, 1, 0, SDC_F32, SDC_BEPI_NONE, 1, y.p, x.p, gw.p, NULL, NULL);
        /* the rest of a block's GEMMs, and the fused ones without their epilogues (what fusing costs or saves) */
        time_gemm("gemm attproj dinp 16384x768x768", N, C, C, 0, 0, SDC_BF16, SDC_BEPI_NONE, 0, x.p, w.p, y.p, NULL, NULL);
        time_gemm("gemm fc dinp 16384x768x3072", N, C, 4 * C, 0, 0, SDC_BF16, SDC_BEPI_NONE, 0, x.p, w.p, y.p, NULL, NULL);
        time_gemm("gemm attproj dW 768x768x16384 bgrad", C, C, N, 1, 0, SDC_F32, SDC_BEPI_BGRAD_A, 1, x.p, w.p, gw.p, gb.p, NULL);
        /* B of this dW is (N, 4C): the aux buffer's size */
        time_gemm("gemm fcproj dW 768x3072x16384 bgrad", C, 4 * C, N, 1, 0, SDC_F32, SDC_BEPI_BGRAD_A, 1, x.p, aux.p, gw.p, gb.p, NULL);
        time_gemm("gemm qkv dW 2304x768x16384 (no bgrad)", 3 * C, C, N, 1, 0, SDC_F32, SDC_BEPI_NONE, 1, x.p, w.p, gw.p, NULL, NULL);
        time_gemm("gemm attproj dW 768x768x16384 (no bgrad)", C, C, N, 1, 0, SDC_F32, SDC_BEPI_NONE, 1, x.p, w.p, gw.p, NULL, NULL);
        time_gemm("gemm fcproj dW 768x3072x16384 (no bgrad)", C, 4 * C, N, 1, 0, SDC_F32, SDC_BEPI_NONE, 1, x.p, aux.p, gw.p, NULL, NULL);
        time_gemm("gemm fc fwd 16384x3072x768 bias (no gelu)", N, 4 * C, C, 0, 1, SDC_BF16, SDC_BEPI_BIAS, 0, x.p, w.p, y.p, bias.p, NULL);
        time_gemm("gemm fc fwd 16384x3072x768 (no epilogue)", N, 4 * C, C, 0, 1, SDC_BF16, SDC_BEPI_NONE, 0, x.p, w.p, y.p, NULL, NULL);
        time_gemm("gemm fcproj dinp 16384x3072x768 (no dgelu)", N, 4 * C, C, 0, 0, SDC_BF16, SDC_BEPI_NONE, 0, x.p, w.p, y.p, NULL, NULL);
        time_gemm("gemm fc dW 3072x768x16384 (no bgrad)", 4 * C, C, N, 1, 0, SDC_F32, SDC_BEPI_NONE, 1, x.p, w.p, gw.p, NULL, NULL);
        time_gemm("gemm fc dW 3072x768x16384 bf16 out, no bgrad", 4 * C, C, N, 1, 0, SDC_BF16, SDC_BEPI_NONE, 0, x.p, w.p, y.p, NULL, NULL);
    }
}

int main(int argc, char **argv) {
    bool do_time = true, big = true, checks = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-time")) do_time = false;
        else if (!strcmp(argv[i], "--no-big")) big = false;
        else if (!strcmp(argv[i], "--time-only")) checks = false;
        else {
            fprintf(stderr, "usage: %s [--no-time] [--no-big] [--time-only]\n", argv[0]);
            return 2;
        }
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs, sdc ABI %d\n", prop.name, prop.multiProcessorCount, sdc_abi_version());
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines in order with stderr's in a log */
    CK(cudaStreamCreate(&g_stream)); /* blocking: ordered with the plain cudaMemcpy and cudaMemset calls */
    SC(sdc_create(dptr(g_stream), 0, &g_ctx));
    if (cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasLtCreate failed\n");
        return 100;
    }
    g_ws = new Dev(WS_BYTES);

    if (checks) {
        printf("---- checks: gpt-tiny (B=4 T=128 C=128 NH=4 V=256) ----\n");
        check_layernorm("tiny", 4 * 128, 128);
        check_layernorm("6x384 N=300", 300, 384);   /* two vectors a lane, rows not a multiple of the block's */
        check_layernorm("C=1000 N=70", 70, 1000);   /* four, the last lanes idle */
        check_layernorm("C=1600 N=40", 40, 1600);   /* the generic form (GPT-2 XL's width) */
        check_gelu("tiny", (int64_t)4 * 128 * 512 + 5);
        check_embed("tiny", 4, 128, 128, 256);
        check_attention("tiny hs32", 4, 128, 128, 4);
        check_attention("6x384 hs64", 2, 256, 384, 6);
        check_classifier("tiny", 512, 256, 256);
        check_adamw("1M+3", 1000003);
        check_gemm("tiny 512x384x128", 512, 384, 128);
        check_gemm_batched("tiny", 4, 128, 64, 64);
        check_bias("tiny 512x384", 512, 384);
        check_bias("ragged 1000x40", 1000, 40); /* a last chunk of 40 rows, 40 columns of a 256-column block */
        if (big) {
            printf("---- checks: GPT-2 124M sizes ----\n");
            check_layernorm("gpt2 N=16384 C=768", 16384, 768);
            check_gelu("gpt2 16384x3072", (int64_t)16384 * 3072);
            check_embed("gpt2 B=16 T=1024 V=50257", 16, 1024, 768, 50257);
            check_attention("gpt2 B=1 T=1024 NH=12", 1, 1024, 768, 12);
            check_classifier("gpt2 N=256 V=50257 Vp=50304", 256, 50257, 50304);
            check_gemm("gpt2 256x2304x768", 256, 2304, 768);
            check_gemm("gpt2 256x768x3072", 256, 768, 3072);
            check_bias("gpt2 16384x2304", 16384, 2304);
            check_bias("long 40000x768", 40000, 768); /* 512 chunks of 80 rows, the last 12 empty */
        }
    }
    if (do_time) timings();
    fflush(stdout);
    CK(cudaStreamSynchronize(g_stream));
    printf("==== %s: %d failure(s)\n", g_fail ? "FAIL" : "ALL PASS", g_fail);
    delete g_ws;
    cublasLtDestroy(g_lt);
    SC(sdc_destroy(&g_ctx));
    return g_fail > 100 ? 100 : g_fail;
}
