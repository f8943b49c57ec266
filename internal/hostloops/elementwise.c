//go:build cgo

// The element-wise C loops (vector.h, activation.h, optimizer.h), compiled
// for the baseline instruction set and, on x86-64, again for AVX2, each
// copy under its own names (SDH_NAME); the entry points run the copy that
// hostloops.c picked. Every element goes through the same IEEE float
// operations, in the same order, as the Go loops, and no multiply is fused
// into an add (dispatch.h). Pointers may alias only where the Go callers
// let them (dst may be an input of none of these).

#include "dispatch.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SDH_VF sdh_v4
#define SDH_VSQRT(x) ((sdh_v4)_mm_sqrt_ps((__m128)(x)))
#endif

#define SDH_NAME(f) sdh_##f##_base
#include "vector.h"
#include "activation.h"
#include "optimizer.h"
#undef SDH_NAME

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2")
#undef SDH_VF
#undef SDH_VSQRT
#define SDH_VF sdh_v8
#define SDH_VSQRT(x) ((sdh_v8)_mm256_sqrt_ps((__m256)(x)))
#define SDH_NAME(f) sdh_##f##_avx2
#include "vector.h"
#include "activation.h"
#include "optimizer.h"
#undef SDH_NAME
#pragma GCC pop_options
#endif

void sdh_sum2(float *d, const float *a, const float *b, long n) { SDH_CALL(sum2, d, a, b, n); }
void sdh_acc1(float *d, const float *a, long n) { SDH_CALL(acc1, d, a, n); }
void sdh_acc2(float *d, const float *a, const float *b, long n) { SDH_CALL(acc2, d, a, b, n); }
void sdh_scale(float *x, float s, long n) { SDH_CALL(scale, x, s, n); }
int sdh_all_finite(const float *x, long n) { return SDH_CALL(all_finite, x, n); }
void sdh_relu_mask(float *d, const float *y, long n) { SDH_CALL(relu_mask, d, y, n); }
void sdh_bias_act(float *y, const float *bias, long rows, long n, int relu) {
	SDH_CALL(bias_act, y, bias, rows, n, relu);
}
void sdh_col_sums(float *s, const float *d, long rows, long n) { SDH_CALL(col_sums, s, d, rows, n); }
void sdh_sgd(float *p, const float *g, float lr, float wd, long n) { SDH_CALL(sgd, p, g, lr, wd, n); }
void sdh_sgd_momentum(float *p, const float *g, float *buf, float lr, float wd, float mu,
                      int nesterov, int first, long n) {
	SDH_CALL(sgd_momentum, p, g, buf, lr, wd, mu, nesterov, first, n);
}
void sdh_adam(float *p, const float *g, float *m, float *v, float decay, float l2, float b1,
              float b2, float c1, float c2, float eps, float step_size, float bc2, long n) {
	SDH_CALL(adam, p, g, m, v, decay, l2, b1, b2, c1, c2, eps, step_size, bc2, n);
}
