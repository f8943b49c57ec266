/*
 * check_embed.cu: the bf16 token + position embedding (sdc_embed_bf16 and
 * its backward, sd_compute_index.cu) against a CPU reference, the repeat of
 * the backward's bits, and their timing.
 */
#include "check_common.h"

void check_embed(const char *tag, int B, int T, int C, int V) {
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

/* forward and backward (sort, wte, wpe) at B=16, T=1024 */
void time_embed() {
    using namespace gpt2;
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
