/*
 * sd_gpt_attention_mma.cu: causal self-attention on mma.sync (placeholder:
 * no shape is supported yet, so sdg_attention_forward/backward take wmma).
 */
#include "sd_gpt.cuh"

extern "C" int sdg_attention_mma_supported(int T, int C, int NH) {
    (void)T; (void)C; (void)NH;
    return 0;
}

extern "C" int sdg_attention_forward_mma(void *out, float *lse, const void *qkv, int B, int T, int C, int NH,
                                         void *stream) {
    (void)out; (void)lse; (void)qkv; (void)B; (void)T; (void)C; (void)NH; (void)stream;
    return SDG_FAIL(SDG_ERR_ARG, "sdg_attention_forward_mma: not built yet");
}

extern "C" int sdg_attention_backward_mma(void *dqkv, const void *dout, const void *qkv, const void *out,
                                          const float *lse, int B, int T, int C, int NH, void *scratch, void *stream) {
    (void)dqkv; (void)dout; (void)qkv; (void)out; (void)lse; (void)B; (void)T; (void)C; (void)NH; (void)scratch;
    (void)stream;
    return SDG_FAIL(SDG_ERR_ARG, "sdg_attention_backward_mma: not built yet");
}
