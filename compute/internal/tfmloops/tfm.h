//go:build cgo

// Entry points of tfm.c, declared for tfm_cgo.go.
#ifndef SYMDDP_TFM_H
#define SYMDDP_TFM_H

#include <stdint.h>

const char *sdt_init(void);
void sdt_use_base(int on);
void sdt_layernorm(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                   long rows, long c, float eps);
void sdt_layernorm_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, const float *mean, const float *rstd, long rows, long c,
                            int add_dx);
void sdt_gelu(float *y, const float *x, long n);
void sdt_gelu_backward(float *dx, const float *dy, const float *x, long n);
void sdt_softmax_causal(float *p, long ld, long r0, long rows, long width);
void sdt_softmax_causal_backward(float *ds, const float *p, long ld, long r0, long rows, long width);
void sdt_gather_rows(float *dst, const float *table, const int32_t *idx, long n, long c, int accumulate);
void sdt_scatter_add_rows(float *table, const float *src, const int32_t *idx, long n, long c);

#endif
