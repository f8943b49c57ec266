//go:build cgo

// The C loops of package vec: kernels.h compiled for the baseline
// instruction set and, on x86-64, again for AVX2, picked once at start-up.

// No multiply may be fused into an add (the default of GNU C where the
// target has FMA instructions; neither target below enables them, and this
// keeps it so if one ever does). cgo does not pass -ffp-contract=off.
#pragma GCC optimize("fp-contract=off")
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vec.h"

#if defined(__x86_64__)
#include <immintrin.h>
typedef float sdv_v4 __attribute__((vector_size(16)));
typedef float sdv_v8 __attribute__((vector_size(32)));
#define SDV_VF sdv_v4
#define SDV_VSQRT(x) ((sdv_v4)_mm_sqrt_ps((__m128)(x)))
#endif

#define SDV_NAME(f) sdv_##f##_base
#include "kernels.h"
#undef SDV_NAME

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2")
#undef SDV_VF
#undef SDV_VSQRT
#define SDV_VF sdv_v8
#define SDV_VSQRT(x) ((sdv_v8)_mm256_sqrt_ps((__m256)(x)))
#define SDV_NAME(f) sdv_##f##_avx2
#include "kernels.h"
#undef SDV_NAME
#pragma GCC pop_options
#endif

static int sdv_avx2;

const char *sdv_init(void) {
#if defined(__x86_64__)
	__builtin_cpu_init();
	sdv_avx2 = __builtin_cpu_supports("avx2");
	return sdv_avx2 ? "avx2" : "x86-64";
#else
	return "portable";
#endif
}

#if defined(__x86_64__)
#define SDV_CALL(f, ...) (sdv_avx2 ? sdv_##f##_avx2(__VA_ARGS__) : sdv_##f##_base(__VA_ARGS__))
#else
#define SDV_CALL(f, ...) sdv_##f##_base(__VA_ARGS__)
#endif

void sdv_sum2(float *d, const float *a, const float *b, long n) { SDV_CALL(sum2, d, a, b, n); }
void sdv_acc1(float *d, const float *a, long n) { SDV_CALL(acc1, d, a, n); }
void sdv_acc2(float *d, const float *a, const float *b, long n) { SDV_CALL(acc2, d, a, b, n); }
void sdv_scale(float *x, float s, long n) { SDV_CALL(scale, x, s, n); }
int sdv_all_finite(const float *x, long n) { return SDV_CALL(all_finite, x, n); }
void sdv_relu_mask(float *d, const float *y, long n) { SDV_CALL(relu_mask, d, y, n); }
void sdv_bias_act(float *y, const float *bias, long rows, long n, int relu) {
	SDV_CALL(bias_act, y, bias, rows, n, relu);
}
void sdv_col_sums(float *s, const float *d, long rows, long n) { SDV_CALL(col_sums, s, d, rows, n); }
void sdv_sgd(float *p, const float *g, float lr, float wd, long n) { SDV_CALL(sgd, p, g, lr, wd, n); }
void sdv_sgd_momentum(float *p, const float *g, float *buf, float lr, float wd, float mu,
                      int nesterov, int first, long n) {
	SDV_CALL(sgd_momentum, p, g, buf, lr, wd, mu, nesterov, first, n);
}
void sdv_adam(float *p, const float *g, float *m, float *v, float decay, float l2, float b1,
              float b2, float c1, float c2, float eps, float step_size, float bc2, long n) {
	SDV_CALL(adam, p, g, m, v, decay, l2, b1, b2, c1, c2, eps, step_size, bc2, n);
}
