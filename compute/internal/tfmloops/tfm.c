//go:build cgo

// The C loops of package tfmloops: kernels.h compiled for the baseline
// instruction set and, on x86-64, again for AVX2, picked once at start-up.

// No multiply may be fused into an add: the Go loops round every product.
// cgo does not pass -ffp-contract=off.
#pragma GCC optimize("fp-contract=off", "no-trapping-math")
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tfm.h"

typedef float sdt_v8 __attribute__((vector_size(32)));
typedef int32_t sdt_vi8 __attribute__((vector_size(32)));

#define SDT_NAME(f) sdt_##f##_base
#include "kernels.h"
#undef SDT_NAME

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2")
#define SDT_NAME(f) sdt_##f##_avx2
#include "kernels.h"
#undef SDT_NAME
#pragma GCC pop_options
#endif

static int sdt_avx2, sdt_has_avx2;

const char *sdt_init(void) {
#if defined(__x86_64__)
	__builtin_cpu_init();
	sdt_has_avx2 = sdt_avx2 = __builtin_cpu_supports("avx2");
	return sdt_avx2 ? "avx2" : "x86-64";
#else
	return "portable";
#endif
}

// sdt_use_base makes the loops the baseline ones (on), or the best ones
// again (off): for the tests, which compare both with the Go loops.
void sdt_use_base(int on) { sdt_avx2 = on ? 0 : sdt_has_avx2; }

#if defined(__x86_64__)
#define SDT_CALL(f, ...) (sdt_avx2 ? sdt_##f##_avx2(__VA_ARGS__) : sdt_##f##_base(__VA_ARGS__))
#else
#define SDT_CALL(f, ...) sdt_##f##_base(__VA_ARGS__)
#endif

void sdt_layernorm(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                   long rows, long c, float eps) {
	SDT_CALL(layernorm, y, mean, rstd, x, w, b, rows, c, eps);
}
void sdt_layernorm_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, const float *mean, const float *rstd, long rows, long c,
                            int add_dx) {
	SDT_CALL(layernorm_backward, dx, dw, db, dy, x, w, mean, rstd, rows, c, add_dx);
}
void sdt_gelu(float *y, const float *x, long n) { SDT_CALL(gelu, y, x, n); }
void sdt_gelu_backward(float *dx, const float *dy, const float *x, long n) {
	SDT_CALL(gelu_backward, dx, dy, x, n);
}
void sdt_softmax_causal(float *p, long ld, long r0, long rows, long width) {
	SDT_CALL(softmax_causal, p, ld, r0, rows, width);
}
void sdt_softmax_causal_backward(float *ds, const float *p, long ld, long r0, long rows, long width) {
	SDT_CALL(softmax_causal_backward, ds, p, ld, r0, rows, width);
}
void sdt_gather_rows(float *dst, const float *table, const int32_t *idx, long n, long c, int accumulate) {
	SDT_CALL(gather_rows, dst, table, idx, n, c, accumulate);
}
void sdt_scatter_add_rows(float *table, const float *src, const int32_t *idx, long n, long c) {
	SDT_CALL(scatter_add_rows, table, src, idx, n, c);
}
