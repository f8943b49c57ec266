/*
 * check_classifier.cu: the fused bf16 classifier (sdc_softmax_xent with
 * SDC_BF16, sd_compute_loss.cu) against a CPU reference at each block size,
 * the row cached in shared memory (where it fits) against the uncached
 * kernel bit for bit, and its timing.
 */
#include "check_common.h"

extern "C" int sdc_clsb_threads; /* sd_compute_loss.cu: the bf16 block size to time (0: the default) */
extern "C" int sdc_clsb_cache;   /* sd_compute_loss.cu: 0 runs the kernel uncached */

void check_classifier(const char *tag, int N, int V, int Vp) {
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
    for (int threads : {0, 256, 512, 1024}) { /* the default block size, then each that gptcheck times */
        if (threads) {
            sdc_clsb_threads = threads;
            up(dl, hl);
            SC(sdc_softmax_xent(&g_ctx, SDC_BF16, dptr(dl.p), dptr(dt.i()), N, V, Vp, dptr(dl.p), dscale, 0, 0, dptr(dloss.f())));
            sdc_clsb_threads = 0;
        }
        const char *size = threads == 256 ? " (256 thr)" : threads == 512 ? " (512 thr)" : threads ? " (1024 thr)" : "";
        snprintf(name, sizeof name, "classifier.loss %s%s", tag, size);
        compare_v(name, down<float>(dloss, N), rloss, 1e-4, 1e-4);
        snprintf(name, sizeof name, "classifier.dlogits %s%s", tag, size);
        compare_v(name, down_bf16(dl, rg.size()), rg, 1e-2, 1e-2);
        /* the same block size uncached: the same bits (the defaults differ in block size) */
        if (!threads) continue;
        const std::vector<uint16_t> cached = down<uint16_t>(dl, hl.size());
        const std::vector<float> cached_loss = down<float>(dloss, N);
        sdc_clsb_threads = threads;
        sdc_clsb_cache = 0;
        up(dl, hl);
        SC(sdc_softmax_xent(&g_ctx, SDC_BF16, dptr(dl.p), dptr(dt.i()), N, V, Vp, dptr(dl.p), dscale, 0, 0, dptr(dloss.f())));
        sdc_clsb_cache = 1;
        sdc_clsb_threads = 0;
        const std::vector<uint16_t> plain = down<uint16_t>(dl, hl.size());
        const std::vector<float> plain_loss = down<float>(dloss, N);
        snprintf(name, sizeof name, "classifier cached/uncached %s%s", tag, size);
        repeat_check(name, cached.data(), plain.data(), 2 * cached.size());
        snprintf(name, sizeof name, "classifier loss cached/uncached %s%s", tag, size);
        repeat_check(name, cached_loss.data(), plain_loss.data(), 4 * (size_t)N);
    }
}

/* forward and backward in place at N=16384, V=50304, each block size */
void time_classifier() {
    using namespace gpt2;
    Dev logits((size_t)N * Vp * 2), tgt(N * 4), loss(N * 4);
    fill_bf16(logits, (size_t)N * Vp, 2.f);
    std::vector<int32_t> t(N);
    for (int i = 0; i < N; i++) t[i] = (int32_t)(rnd_u32() % (uint32_t)V);
    up(tgt, t);
    double us = time_us([&] { SC(sdc_softmax_xent(&g_ctx, SDC_BF16, dptr(logits.p), dptr(tgt.i()), N, V, Vp, dptr(logits.p), 1.f / N, 0, 0, dptr(loss.f()))); }, 10);
    report_bw("classifier (fwd+bwd, in place, the default: row cached)", us, 2.0 * N * Vp * 2);
    sdc_clsb_cache = 0;
    us = time_us([&] { SC(sdc_softmax_xent(&g_ctx, SDC_BF16, dptr(logits.p), dptr(tgt.i()), N, V, Vp, dptr(logits.p), 1.f / N, 0, 0, dptr(loss.f()))); }, 10);
    sdc_clsb_cache = 1;
    report_bw("classifier uncached (the row read twice)", us, 3.0 * N * Vp * 2);
    /* each block size, cached: rows in flight per SM against threads per row */
    for (int threads : {256, 512, 1024}) {
        sdc_clsb_threads = threads;
        us = time_us([&] { SC(sdc_softmax_xent(&g_ctx, SDC_BF16, dptr(logits.p), dptr(tgt.i()), N, V, Vp, dptr(logits.p), 1.f / N, 0, 0, dptr(loss.f()))); }, 10);
        char label[64];
        snprintf(label, sizeof label, "classifier cached, %d threads a block", threads);
        report_bw(label, us, 2.0 * N * Vp * 2);
    }
    sdc_clsb_threads = 0;
}
