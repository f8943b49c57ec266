//go:build cgo

// Entry points of the C loops, declared for cgo.go: the instruction set
// (hostloops.c), the element-wise loops (elementwise.c) and the row loops
// (rows.c).
#ifndef SYMDDP_HOSTLOOPS_H
#define SYMDDP_HOSTLOOPS_H

#include <stdint.h>

const char *sdh_init(void);
void sdh_use_base(int on);

void sdh_sum2(float *d, const float *a, const float *b, long n);
void sdh_acc1(float *d, const float *a, long n);
void sdh_acc2(float *d, const float *a, const float *b, long n);
void sdh_scale(float *x, float s, long n);
int sdh_all_finite(const float *x, long n);
void sdh_relu_mask(float *d, const float *y, long n);
void sdh_bias_act(float *y, const float *bias, long rows, long n, int relu);
void sdh_col_sums(float *s, const float *d, long rows, long n);
void sdh_sgd(float *p, const float *g, float lr, float wd, long n);
void sdh_sgd_momentum(float *p, const float *g, float *buf, float lr, float wd, float mu,
                      int nesterov, int first, long n);
void sdh_adam(float *p, const float *g, float *m, float *v, float decay, float l2, float b1,
              float b2, float c1, float c2, float eps, float step_size, float bc2, long n);

void sdh_layernorm(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                   long rows, long c, float eps);
void sdh_layernorm_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, const float *mean, const float *rstd, long rows, long c,
                            int add_dx);
void sdh_gelu(float *y, const float *x, long n);
void sdh_gelu_backward(float *dx, const float *dy, const float *x, long n);
void sdh_rmsnorm(float *y, float *rstd, const float *x, const float *w, long rows, long c, float eps);
void sdh_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                          const float *rstd, long rows, long c, int add_dx);
void sdh_swiglu(float *y, const float *ab, long rows, long f);
void sdh_swiglu_backward(float *dab, const float *dy, const float *ab, long rows, long f);
void sdh_rotate(float *y, const float *x, const float *cos_t, const float *sin_t, long rows, long width, long ld,
                long hs, long t, int inverse);
void sdh_softmax_causal(float *p, long ld, long r0, long rows, long width);
void sdh_softmax_causal_backward(float *ds, const float *p, long ld, long r0, long rows, long width);
int sdh_xent_fast(void);
long sdh_xent_row(const float *x, float *g, long n, float scale, double *m, double *sum);
void sdh_gather_rows(float *dst, const float *table, const int32_t *idx, long n, long c, int accumulate);
void sdh_scatter_add_rows(float *table, const float *src, const int32_t *idx, long n, long c);

#endif
