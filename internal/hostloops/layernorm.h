//go:build cgo

// The C loops of layernorm.go: each element's IEEE float operations in the Go
// loops' order. rows.c compiles them once per instruction set.

static void SDH_NAME(layernorm)(float *y, float *mean, float *rstd, const float *x, const float *w,
                                const float *b, long rows, long c, float eps) {
	const float fc = (float)c;
	for (long i = 0; i < rows; i++) {
		const float *xr = x + i * c;
		float *yr = y + i * c;
		const float m = SDH_NAME(sum8_)(xr, c) / fc;
		sdh_v8 a = {0};
		long j = 0;
		for (; j + 8 <= c; j += 8) {
			sdh_v8 q;
			memcpy(&q, xr + j, sizeof q);
			q = q - m;
			a += q * q;
		}
		float s = SDH_NAME(hsum8)(&a);
		for (; j < c; j++) {
			float d = xr[j] - m;
			s += d * d;
		}
		const float rs = 1.0f / sqrtf(s / fc + eps);
		for (j = 0; j < c; j++) {
			float nv = (xr[j] - m) * rs;
			yr[j] = nv * w[j] + b[j];
		}
		mean[i] = m;
		rstd[i] = rs;
	}
}

// layernorm_dx is the element-wise part of layernorm_backward for one row:
// mg and mgn are the row's means of w·dy and w·dy·n.
static inline void SDH_NAME(layernorm_dx)(float *restrict dxr, float *restrict dw, float *restrict db,
                                          const float *restrict dyr, const float *restrict xr,
                                          const float *restrict w, float m, float rs, float mg,
                                          float mgn, long c, int add_dx) {
	if (add_dx) {
		for (long j = 0; j < c; j++) {
			float nv = (xr[j] - m) * rs, d = dyr[j];
			float g = w[j] * d;
			dxr[j] += ((g - mg) - nv * mgn) * rs;
			db[j] += d;
			dw[j] += nv * d;
		}
	} else {
		for (long j = 0; j < c; j++) {
			float nv = (xr[j] - m) * rs, d = dyr[j];
			float g = w[j] * d;
			dxr[j] = ((g - mg) - nv * mgn) * rs;
			db[j] += d;
			dw[j] += nv * d;
		}
	}
}

static void SDH_NAME(layernorm_backward)(float *dx, float *dw, float *db, const float *dy, const float *x,
                                         const float *w, const float *mean, const float *rstd, long rows,
                                         long c, int add_dx) {
	const float fc = (float)c;
	for (long i = 0; i < rows; i++) {
		const float *xr = x + i * c, *dyr = dy + i * c;
		float *dxr = dx + i * c;
		const float m = mean[i], rs = rstd[i];
		sdh_v8 a = {0}, bb = {0};
		long j = 0;
		for (; j + 8 <= c; j += 8) {
			sdh_v8 q, g, wq;
			memcpy(&q, xr + j, sizeof q);
			memcpy(&g, dyr + j, sizeof g);
			memcpy(&wq, w + j, sizeof wq);
			g = wq * g;
			a += g;
			bb += g * ((q - m) * rs);
		}
		float sg = SDH_NAME(hsum8)(&a), sgn = SDH_NAME(hsum8)(&bb);
		for (; j < c; j++) {
			float g = w[j] * dyr[j];
			sg += g;
			sgn += g * ((xr[j] - m) * rs);
		}
		SDH_NAME(layernorm_dx)(dxr, dw, db, dyr, xr, w, m, rs, sg / fc, sgn / fc, c, add_dx);
	}
}
