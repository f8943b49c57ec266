/*
 * attention_f32_sim.cpp: runs the kernels of cuda/sd_compute_attention_f32.cu
 * (the part between its "the kernels" and "the launchers" markers, which
 * check.sh copies to attention_f32_kernels.inc) on the CPU, against causal
 * attention in float64, on a machine without a GPU. One OS thread per CUDA
 * thread and one block at a time: __syncthreads is a barrier of the block,
 * a shuffle goes through a slot per thread between two barriers (so every
 * thread of a block must reach it, as the kernels' do), and a thread that
 * returns drops out of the barrier. The asynchronous copies into shared
 * memory copy at once. It checks the kernels' indexing, tiling, masks,
 * online softmax and backward sums as written; not what only a GPU shows
 * (the memory model, whether copies are waited for before they are read,
 * bank conflicts, speed).
 */
#include <algorithm>
#include <climits>
#include <cstdio>
#include <random>

#include "sim.h"
#define __shared__
/* The asynchronous copies (sd_compute.cuh's) copy at once. */
static inline void sdc_cp16_zfill(float *dst, const float *src, int n) {
    for (int i = 0; i < 4; i++) dst[i] = n ? src[i] : 0.0f;
}
static inline void sdc_cp_commit() {}
template <int N>
static inline void sdc_cp_wait() {}
float4 af_smem[16384]; /* the kernels' dynamic shared memory (256 KiB) */
#include "attention_f32_kernels.inc"

/* The largest relative difference (absolute below 1) of got from want, printed; 1 above tol (or NaN). */
static int check(const char *what, const std::vector<float> &got, const std::vector<double> &want, double tol) {
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double d = std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i]));
        if (!(d <= worst)) worst = d, at = i; /* NaN sticks */
    }
    printf("  %-3s largest difference %.3g (element %zu: %g, want %g)%s\n", what, worst, at, got[at], want[at],
           worst <= tol ? "" : "  FAIL");
    return worst <= tol ? 0 : 1;
}

/* One shape: q, k, v packed as GPT-2's qkv (k C and v 2C past q, rows 3C apart) or grouped (three tensors). */
static int run(int B, int T, int NH, int KVH, int HS, bool packed) {
    printf("B=%d T=%d NH=%d KVH=%d HS=%d %s\n", B, T, NH, KVH, HS, packed ? "packed qkv" : "grouped");
    const int C = NH * HS, KW = KVH * HS, grp = NH / KVH;
    const int64_t ldq = packed ? 3 * C : C, ldkv = packed ? 3 * C : KW, R = (int64_t)B * T;
    std::mt19937 rng((unsigned)(B * 100000 + T * 100 + HS));
    std::uniform_real_distribution<float> U(-2, 2); /* scores of a few units: softmax far from uniform */
    std::vector<float> x(packed ? R * 3 * C : R * (C + 2 * KW)), dx(x.size(), NAN);
    for (auto &e : x) e = U(rng);
    const float *q = x.data(), *k = q + (packed ? C : R * C), *v = k + (packed ? C : R * KW);
    float *dq = dx.data(), *dk = dq + (packed ? C : R * C), *dv = dk + (packed ? C : R * KW);
    std::vector<float> out(R * C, NAN), lse((size_t)B * NH * T, NAN), dout(R * C), D(lse.size(), NAN);
    for (auto &e : dout) e = U(rng) / 2;
    const int nb = (T + AF_B - 1) / AF_B;
    const af_shape sh = {ldq, ldkv, B, T, NH, KVH, grp, HS, nb, (float)(1.4426950408889634 / std::sqrt((double)HS)),
                         (float)(1.0 / std::sqrt((double)HS))};
    launch((unsigned)(B * NH * nb), AF_THREADS, [&] { af_forward(out.data(), lse.data(), q, k, v, sh); });
    launch((unsigned)((B * NH * T + 7) / 8), 256, [&] { af_backward_d(D.data(), dout.data(), out.data(), sh); });
    /* the causal dS tiles, written by af_backward_dkv and read by af_backward_dq (NaN: a tile not written shows) */
    std::vector<float> dS((size_t)B * NH * nb * (nb + 1) / 2 * 4096, NAN);
    launch((unsigned)(B * KVH * nb), AF_THREADS,
           [&] { af_backward_dkv(dk, dv, dS.data(), dout.data(), q, k, v, lse.data(), D.data(), sh); });
    launch((unsigned)(B * NH * nb), AF_THREADS, [&] { af_backward_dq(dq, k, dS.data(), sh); });

    /* float64: out, lse and the gradients, position by position */
    const double scale = 1 / std::sqrt((double)HS);
    std::vector<double> wo(out.size()), wl(lse.size()), gq(R * C), gk(R * KW), gv(R * KW), p(T);
    auto Q = [&](int64_t r, int h) { return q + r * ldq + h * HS; };
    auto K = [&](int64_t r, int h) { return k + r * ldkv + (h / grp) * HS; };
    auto V = [&](int64_t r, int h) { return v + r * ldkv + (h / grp) * HS; };
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const int64_t ri = (int64_t)b * T + i;
                double mx = -INFINITY, sum = 0, Dd = 0;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int e = 0; e < HS; e++) s += (double)Q(ri, h)[e] * K(ri - i + j, h)[e];
                    p[j] = s * scale;
                    mx = std::max(mx, p[j]);
                }
                for (int j = 0; j <= i; j++) sum += p[j] = std::exp(p[j] - mx);
                wl[((int64_t)b * NH + h) * T + i] = mx + std::log(sum);
                double *o = &wo[ri * C + h * HS];
                const float *g = &dout[ri * C + h * HS];
                for (int e = 0; e < HS; e++) {
                    for (int j = 0; j <= i; j++) o[e] += p[j] / sum * V(ri - i + j, h)[e];
                    Dd += o[e] * g[e];
                }
                for (int j = 0; j <= i; j++) {
                    const int64_t rj = ri - i + j;
                    double dp = 0;
                    for (int e = 0; e < HS; e++) dp += (double)g[e] * V(rj, h)[e];
                    const double P = p[j] / sum, ds = P * (dp - Dd) * scale;
                    for (int e = 0; e < HS; e++) {
                        gq[ri * C + h * HS + e] += ds * K(rj, h)[e];
                        gk[rj * KW + (h / grp) * HS + e] += ds * Q(ri, h)[e];
                        gv[rj * KW + (h / grp) * HS + e] += P * g[e];
                    }
                }
            }
    /* the gradients as the kernels wrote them, every element (dx starts as NaN) */
    auto rows = [&](const float *base, int64_t ld, int width) {
        std::vector<float> r;
        for (int64_t i = 0; i < R; i++) r.insert(r.end(), base + i * ld, base + i * ld + width);
        return r;
    };
    return check("out", out, wo, 1e-5) + check("lse", lse, wl, 1e-5) + check("dq", rows(dq, ldq, C), gq, 2e-5) +
           check("dk", rows(dk, ldkv, KW), gk, 2e-5) + check("dv", rows(dv, ldkv, KW), gv, 2e-5);
}

int main() {
    int bad = 0;
    bad += run(2, 130, 2, 2, 64, true);  /* GPT-2's head size, three query tiles, the last partial */
    bad += run(1, 64, 1, 1, 64, true);   /* exactly one tile */
    bad += run(1, 70, 4, 2, 64, false);  /* grouped: two query heads a key/value head */
    bad += run(2, 9, 3, 3, 5, true);     /* a head size of 5, a grid with warps past the rows (D) */
    bad += run(1, 200, 4, 1, 16, false); /* one key/value head for four query heads */
    printf(bad ? "FAIL\n" : "ok\n");
    return bad ? 1 : 0;
}
