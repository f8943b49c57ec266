/*
 * check_common.h: what the GPT kernel check's files (check.cu and one
 * check_<operation>.cu per operation, beside its kernels' sd_compute_*.cu)
 * share: host bf16, random data, device buffers, the comparison with a CPU
 * reference, timing, and each operation's check and timing.
 */
#pragma once

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "check_macros.h"

extern int g_fail;          /* the failures so far (the exit status) */
extern cudaStream_t g_stream;
extern sdc_ctx g_ctx;       /* the compute ABI's context over g_stream */
extern uint64_t g_rng;      /* the random data's state */

/* The GPT-2 124M shapes the timings run at. */
namespace gpt2 {
const int B = 16, T = 1024, C = 768, NH = 12, V = 50304, Vp = 50304, N = B * T;
}

/* ---- host bf16 ---- */
static inline uint16_t f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- random numbers ---- */
static inline uint32_t rnd_u32() {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static inline float rnd_uniform() { return ((rnd_u32() & 0xffffff) + 0.5f) / 16777216.f; }
static inline float rnd_normal() {
    float u = rnd_uniform(), v = rnd_uniform();
    return sqrtf(-2.f * logf(u)) * cosf(6.2831853f * v);
}
/* n bf16 values (as bits) of std sd, and their floats. */
static inline void rnd_bf16(std::vector<uint16_t> &h, std::vector<float> &f, size_t n, float sd, float mean = 0.f) {
    h.resize(n);
    f.resize(n);
    for (size_t i = 0; i < n; i++) {
        h[i] = f2bf(mean + sd * rnd_normal());
        f[i] = bf2f(h[i]);
    }
}
static inline void rnd_f32(std::vector<float> &f, size_t n, float sd) {
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
template <class T> static inline void up(Dev &d, const std::vector<T> &h) {
    CK(cudaMemcpy(d.p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T> static inline std::vector<T> down(const Dev &d, size_t n) {
    std::vector<T> h(n);
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(h.data(), d.p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}
static inline std::vector<float> down_bf16(const Dev &d, size_t n) {
    std::vector<uint16_t> h = down<uint16_t>(d, n);
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) f[i] = bf2f(h[i]);
    return f;
}

/* ---- comparison ---- */
static inline void compare(const char *name, const float *got, const double *ref, size_t n, double rtol, double atol_frac) {
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
static inline void compare_v(const char *name, const std::vector<float> &got, const std::vector<double> &ref, double rtol,
                      double atol_frac) {
    compare(name, got.data(), ref.data(), ref.size(), rtol, atol_frac);
}
static inline void repeat_check(const char *name, const void *a, const void *b, size_t bytes) {
    const bool same = memcmp(a, b, bytes) == 0;
    printf("repeat %-33s bits %s\n", name, same ? "identical PASS" : "DIFFER FAIL");
    if (!same) g_fail++;
}

/* ---- timing ---- */
template <class F> static inline double time_us(F fn, int iters) {
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
static inline void report_bw(const char *name, double us, double bytes) {
    printf("time %-35s %10.1f us %8.0f GB/s\n", name, us, bytes / (us * 1e3));
}
static inline void report_fl(const char *name, double us, double flops) {
    printf("time %-35s %10.1f us %8.1f TFLOP/s\n", name, us, flops / (us * 1e6));
}

static inline void fill_bf16(Dev &d, size_t n, float sd) {
    std::vector<uint16_t> h(n);
    for (size_t i = 0; i < n; i++) h[i] = f2bf(sd * rnd_normal());
    up(d, h);
}

/* ---- GPT-2's GELU (tanh form) in double: the GELU's and the GEMM epilogues' reference ---- */
static inline double gelu_ref(double x) {
    const double k = 0.7978845608028654; /* sqrt(2/pi) */
    return 0.5 * x * (1 + tanh(k * (x + 0.044715 * x * x * x)));
}
static inline double gelu_grad_ref(double x) {
    const double k = 0.7978845608028654; /* sqrt(2/pi) */
    const double t = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

/* ---- each operation's check (against a CPU reference at the shape given)
 * and its timing at GPT-2 124M shapes, in check_<operation>.cu ---- */
void check_layernorm(const char *tag, int N, int C);
void time_layernorm();
void check_gelu(const char *tag, int64_t n);
void time_gelu();
void check_embed(const char *tag, int B, int T, int C, int V);
void time_embed();
void check_attention(const char *tag, int B, int T, int C, int NH);
void time_attention();
void check_classifier(const char *tag, int N, int V, int Vp);
void time_classifier();
void check_adamw(const char *tag, int64_t n);
void time_adamw();
void check_gemm(const char *tag, int m, int n, int k);
void check_gemm_batched(const char *tag, int batch, int m, int n, int k);
void time_gemms();
void gemm_free_workspace();
void check_bias(const char *tag, int N, int OC);
void time_bias();
