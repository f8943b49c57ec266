/*
 * check_gelu.cu: the bf16 GELU (sdc_gelu and its backward with SDC_BF16,
 * sd_compute_gelu.cu) against GPT-2's tanh form in double, and its timing.
 */
#include "check_common.h"

void check_gelu(const char *tag, int64_t n) {
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

/* forward and backward (in place) over 16384 x 3072 */
void time_gelu() {
    using namespace gpt2;
    const int64_t n = (int64_t)N * 4 * C;
    Dev x(n * 2), y(n * 2), d(n * 2);
    fill_bf16(x, n, 1.f); fill_bf16(d, n, 1.f);
    double us = time_us([&] { SC(sdc_gelu(&g_ctx, SDC_BF16, dptr(y.p), dptr(x.p), n)); }, 50);
    report_bw("gelu_fwd (16384 x 3072)", us, 2.0 * n * 2);
    us = time_us([&] { SC(sdc_gelu_backward(&g_ctx, SDC_BF16, dptr(d.p), dptr(d.p), dptr(x.p), n)); }, 50);
    report_bw("gelu_bwd (in place)", us, 3.0 * n * 2);
}
