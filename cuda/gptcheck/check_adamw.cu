/*
 * check_adamw.cu: AdamW with a bf16 copy (sdc_adamw_bf16,
 * sd_compute_optim.cu) against PyTorch's AdamW in double, and its timing.
 */
#include "check_common.h"

void check_adamw(const char *tag, int64_t n) {
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

/* over GPT-2 124M's parameters */
void time_adamw() {
    using namespace gpt2;
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
