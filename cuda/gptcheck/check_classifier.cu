/*
 * check_classifier.cu: the fused bf16 classifier (sdc_softmax_xent with
 * SDC_BF16, sd_compute_loss.cu) against a CPU reference at each block size,
 * and its timing.
 */
#include "check_common.h"

extern "C" int sdc_clsb_threads; /* sd_compute_loss.cu: the bf16 block size to time (0: the default) */

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

/* forward and backward in place at N=16384, V=50304, each block size */
void time_classifier() {
    using namespace gpt2;
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
