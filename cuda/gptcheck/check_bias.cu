/*
 * check_bias.cu: the bf16 bias gradient (sdc_bias_act_backward with
 * SDC_BF16, sd_compute_act.cu) against a CPU reference, the repeat of its
 * bits, and its timing.
 */
#include "check_common.h"

void check_bias(const char *tag, int N, int OC) {
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

/* over 16384 x 3072 and 16384 x 768 */
void time_bias() {
    using namespace gpt2;
    Dev d((size_t)N * 4 * C * 2), db(4 * C * 4), scratch(bias_scratch_bytes(N, 4 * C));
    fill_bf16(d, (size_t)N * 4 * C, 1.f);
    CK(cudaMemset(db.p, 0, db.bytes));
    double us = time_us([&] { SC(sdc_bias_act_backward(&g_ctx, SDC_BF16, dptr(d.p), 0, N, 4 * C, dptr(db.f()), SDC_IDENTITY, 0, dptr(scratch.p))); }, 50);
    report_bw("bias_bwd (16384 x 3072)", us, 2.0 * N * 4 * C);
    us = time_us([&] { SC(sdc_bias_act_backward(&g_ctx, SDC_BF16, dptr(d.p), 0, N, C, dptr(db.f()), SDC_IDENTITY, 0, dptr(scratch.p))); }, 50);
    report_bw("bias_bwd (16384 x 768)", us, 2.0 * N * C);
}
