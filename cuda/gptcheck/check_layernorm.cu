/*
 * check_layernorm.cu: the bf16 LayerNorm (sdc_layer_norm and its backward
 * with SDC_BF16, sd_compute_layernorm.cu) against a CPU reference in
 * double, both forward forms' bits, and their timing.
 */
#include "check_common.h"

extern "C" int sdc_lnb_force_generic; /* sd_compute_layernorm.cu: 1 = the bf16 forward's generic form */

void check_layernorm(const char *tag, int N, int C) {
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

/* forward (both forms) and backward at N=16384, C=768 */
void time_layernorm() {
    using namespace gpt2;
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
