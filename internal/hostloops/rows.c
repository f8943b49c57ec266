//go:build cgo

// The row C loops (lanes.h, layernorm.h, gelu.h, swiglu.h, rmsnorm.h,
// rotary.h, attention.h, indexing.h), compiled for the baseline instruction set and, on x86-64,
// again for AVX2, each copy under its own names (SDH_NAME); the entry
// points run the copy that hostloops.c picked. Every element goes through
// the same IEEE float operations, in the same order, as the Go loops, and
// no multiply is fused into an add (dispatch.h). The reductions keep sum8's
// eight lanes in vectors; the element-wise passes are plain loops that the
// compiler vectorises.

// The compiler may assume that no floating-point operation traps: the
// options these loops were written and measured with. It changes no value.
// (The element-wise loops are compiled without it: their code would
// change, and they keep the code they were measured with.)
#pragma GCC optimize("no-trapping-math")

#include "dispatch.h"

#define SDH_NAME(f) sdh_##f##_base
#include "lanes.h"
#include "layernorm.h"
#include "gelu.h"
#include "swiglu.h"
#include "rmsnorm.h"
#include "rotary.h"
#include "attention.h"
#include "indexing.h"
#undef SDH_NAME

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2")
#define SDH_NAME(f) sdh_##f##_avx2
#include "lanes.h"
#include "layernorm.h"
#include "gelu.h"
#include "swiglu.h"
#include "rmsnorm.h"
#include "rotary.h"
#include "attention.h"
#include "indexing.h"
#undef SDH_NAME
#pragma GCC pop_options
#endif

void sdh_layernorm(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                   long rows, long c, float eps) {
	SDH_CALL(layernorm, y, mean, rstd, x, w, b, rows, c, eps);
}
void sdh_layernorm_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, const float *mean, const float *rstd, long rows, long c,
                            int add_dx) {
	SDH_CALL(layernorm_backward, dx, dw, db, dy, x, w, mean, rstd, rows, c, add_dx);
}
void sdh_gelu(float *y, const float *x, long n) { SDH_CALL(gelu, y, x, n); }
void sdh_gelu_backward(float *dx, const float *dy, const float *x, long n) {
	SDH_CALL(gelu_backward, dx, dy, x, n);
}
void sdh_rmsnorm(float *y, float *rstd, const float *x, const float *w, long rows, long c, float eps) {
	SDH_CALL(rmsnorm, y, rstd, x, w, rows, c, eps);
}
void sdh_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                          const float *rstd, long rows, long c, int add_dx) {
	SDH_CALL(rmsnorm_backward, dx, dw, dy, x, w, rstd, rows, c, add_dx);
}
void sdh_swiglu(float *y, const float *ab, long rows, long f) { SDH_CALL(swiglu, y, ab, rows, f); }
void sdh_swiglu_backward(float *dab, const float *dy, const float *ab, long rows, long f) {
	SDH_CALL(swiglu_backward, dab, dy, ab, rows, f);
}
void sdh_rotate(float *y, const float *x, const float *cos_t, const float *sin_t, long rows, long width, long ld,
                long hs, long t, int inverse) {
	SDH_CALL(rotate, y, x, cos_t, sin_t, rows, width, ld, hs, t, inverse);
}
void sdh_softmax_causal(float *p, long ld, long r0, long rows, long width) {
	SDH_CALL(softmax_causal, p, ld, r0, rows, width);
}
void sdh_softmax_causal_backward(float *ds, const float *p, long ld, long r0, long rows, long width) {
	SDH_CALL(softmax_causal_backward, ds, p, ld, r0, rows, width);
}
void sdh_gather_rows(float *dst, const float *table, const int32_t *idx, long n, long c, int accumulate) {
	SDH_CALL(gather_rows, dst, table, idx, n, c, accumulate);
}
void sdh_scatter_add_rows(float *table, const float *src, const int32_t *idx, long n, long c) {
	SDH_CALL(scatter_add_rows, table, src, idx, n, c);
}
