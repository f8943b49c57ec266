//go:build cgo

// Entry points of vec.c, declared for vec_cgo.go.
#ifndef SYMDDP_VEC_H
#define SYMDDP_VEC_H

const char *sdv_init(void);
void sdv_sum2(float *d, const float *a, const float *b, long n);
void sdv_acc1(float *d, const float *a, long n);
void sdv_acc2(float *d, const float *a, const float *b, long n);
void sdv_scale(float *x, float s, long n);
int sdv_all_finite(const float *x, long n);
void sdv_relu_mask(float *d, const float *y, long n);
void sdv_bias_act(float *y, const float *bias, long rows, long n, int relu);
void sdv_col_sums(float *s, const float *d, long rows, long n);
void sdv_sgd(float *p, const float *g, float lr, float wd, long n);
void sdv_sgd_momentum(float *p, const float *g, float *buf, float lr, float wd, float mu,
                      int nesterov, int first, long n);

void sdv_adam(float *p, const float *g, float *m, float *v, float decay, float l2, float b1,
              float b2, float c1, float c2, float eps, float step_size, float bc2, long n);

#endif
