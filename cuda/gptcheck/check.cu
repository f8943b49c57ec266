/*
 * cuda/gptcheck/check.cu: every bf16 kernel of the library (symddp_compute.h's
 * sdc_* with SDC_BF16 and the bf16 forms: the GEMM plans, the attention's
 * implementations) against a plain CPU reference on random data, at
 * gpt-tiny and GPT-2 124M sizes, then each one timed with CUDA events at
 * GPT-2 124M shapes (B=16, T=1024, C=768, 12 heads, V=50304). One operation
 * a file: check_<operation>.cu holds its check and its timing (what they
 * share is check_common.h's); this file runs them. Built and run by
 * scripts/gpu-gpt-kernels-check.sh:
 *
 *   cuda/build.sh
 *   nvcc -O3 -std=c++17 -arch=sm_90 -cudart shared -Icuda cuda/gptcheck/check*.cu -Lbuild -lsymddp_cuda \
 *       -Xlinker -rpath=build -lcublasLt -lcublas
 *
 * Prints one line per check: "check NAME max_abs_err max_rel_err PASS|FAIL (tol ...)",
 * where an element passes when |gpu - ref| <= atol + rtol*|ref|, atol a
 * fraction of the reference's RMS (bf16 keeps 8 bits: rtol 1-3e-2 for bf16
 * results, 1e-4..1e-3 for fp32 ones); "repeat NAME bits identical|DIFFER" for
 * the reductions that promise the same bits every run; then "time NAME us
 * GB/s|TFLOP/s". Exit status: the number of failures (0: all passed).
 * --no-time skips the timings, --no-big the GPT-2-size checks, --time-only every check.
 */
#include "check_common.h"

int g_fail = 0;
cudaStream_t g_stream;
sdc_ctx g_ctx;
uint64_t g_rng = 0x243f6a8885a308d3ull;

int main(int argc, char **argv) {
    bool do_time = true, big = true, checks = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-time")) do_time = false;
        else if (!strcmp(argv[i], "--no-big")) big = false;
        else if (!strcmp(argv[i], "--time-only")) checks = false;
        else {
            fprintf(stderr, "usage: %s [--no-time] [--no-big] [--time-only]\n", argv[0]);
            return 2;
        }
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs, sdc ABI %d\n", prop.name, prop.multiProcessorCount, sdc_abi_version());
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines in order with stderr's in a log */
    CK(cudaStreamCreate(&g_stream)); /* blocking: ordered with the plain cudaMemcpy and cudaMemset calls */
    SC(sdc_create(dptr(g_stream), 0, &g_ctx));

    if (checks) {
        printf("---- checks: gpt-tiny (B=4 T=128 C=128 NH=4 V=256) ----\n");
        check_layernorm("tiny", 4 * 128, 128);
        check_layernorm("6x384 N=300", 300, 384);   /* two vectors a lane, rows not a multiple of the block's */
        check_layernorm("C=1000 N=70", 70, 1000);   /* four, the last lanes idle */
        check_layernorm("C=1600 N=40", 40, 1600);   /* the generic form (GPT-2 XL's width) */
        check_gelu("tiny", (int64_t)4 * 128 * 512 + 5);
        check_embed("tiny", 4, 128, 128, 256);
        check_attention("tiny hs32", 4, 128, 128, 4);
        check_attention("6x384 hs64", 2, 256, 384, 6);
        check_classifier("tiny", 512, 256, 256);
        check_adamw("1M+3", 1000003);
        check_gemm("tiny 512x384x128", 512, 384, 128);
        check_gemm_batched("tiny", 4, 128, 64, 64);
        check_bias("tiny 512x384", 512, 384);
        check_bias("ragged 1000x40", 1000, 40); /* a last chunk of 40 rows, 40 columns of a 256-column block */
        if (big) {
            printf("---- checks: GPT-2 124M sizes ----\n");
            check_layernorm("gpt2 N=16384 C=768", 16384, 768);
            check_gelu("gpt2 16384x3072", (int64_t)16384 * 3072);
            check_embed("gpt2 B=16 T=1024 V=50257", 16, 1024, 768, 50257);
            check_attention("gpt2 B=1 T=1024 NH=12", 1, 1024, 768, 12);
            check_classifier("gpt2 N=256 V=50257 Vp=50304", 256, 50257, 50304);
            check_classifier("llama3 N=64 V=128256 (uncached)", 64, 128256, 128256); /* too long a row to cache */
            check_gemm("gpt2 256x2304x768", 256, 2304, 768);
            check_gemm("gpt2 256x768x3072", 256, 768, 3072);
            check_bias("gpt2 16384x2304", 16384, 2304);
            check_bias("long 40000x768", 40000, 768); /* 512 chunks of 80 rows, the last 12 empty */
        }
    }
    if (do_time) {
        using namespace gpt2;
        printf("---- timings, GPT-2 124M shapes: B=%d T=%d C=%d NH=%d V=%d ----\n", B, T, C, NH, V);
        time_layernorm();
        time_gelu();
        time_embed();
        time_attention();
        time_classifier();
        time_adamw();
        time_bias();
        time_gemms();
    }
    fflush(stdout);
    CK(cudaStreamSynchronize(g_stream));
    printf("==== %s: %d failure(s)\n", g_fail ? "FAIL" : "ALL PASS", g_fail);
    gemm_free_workspace();
    SC(sdc_destroy(&g_ctx));
    return g_fail > 100 ? 100 : g_fail;
}
