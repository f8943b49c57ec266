//go:build cgo

// The C loops of RMSNorm (llama.go): each element's IEEE float operations
// in the Go loops' order, the sums in sum8's lanes. rows.c compiles them
// once per instruction set.

static void SDH_NAME(rmsnorm)(float *y, float *rstd, const float *x, const float *w, long rows, long c,
                              float eps) {
	const float fc = (float)c;
	for (long i = 0; i < rows; i++) {
		const float *xr = x + i * c;
		float *yr = y + i * c;
		sdh_v8 a = {0};
		long j = 0;
		for (; j + 8 <= c; j += 8) {
			sdh_v8 q;
			memcpy(&q, xr + j, sizeof q);
			a += q * q;
		}
		float s = SDH_NAME(hsum8)(&a);
		for (; j < c; j++) s += xr[j] * xr[j];
		const float rs = 1.0f / sqrtf(s / fc + eps);
		for (j = 0; j < c; j++) {
			float nv = xr[j] * rs;
			yr[j] = nv * w[j];
		}
		rstd[i] = rs;
	}
}

// dx may not be dy.
static void SDH_NAME(rmsnorm_backward)(float *dx, float *dw, const float *dy, const float *x, const float *w,
                                       const float *rstd, long rows, long c, int add_dx) {
	const float fc = (float)c;
	for (long i = 0; i < rows; i++) {
		const float *xr = x + i * c, *dyr = dy + i * c;
		float *dxr = dx + i * c;
		const float rs = rstd[i];
		sdh_v8 a = {0};
		long j = 0;
		for (; j + 8 <= c; j += 8) {
			sdh_v8 xv, dv, wv;
			memcpy(&xv, xr + j, sizeof xv);
			memcpy(&dv, dyr + j, sizeof dv);
			memcpy(&wv, w + j, sizeof wv);
			sdh_v8 g = wv * dv;
			sdh_v8 n = xv * rs;
			a += g * n;
		}
		float s = SDH_NAME(hsum8)(&a);
		for (; j < c; j++) {
			float g = w[j] * dyr[j];
			float n = xr[j] * rs;
			s += g * n;
		}
		const float m = s / fc;
		for (j = 0; j < c; j++) {
			float n = xr[j] * rs;
			float d = dyr[j];
			float g = w[j] * d;
			float nm = n * m;
			float gx = (g - nm) * rs;
			if (add_dx)
				dxr[j] += gx;
			else
				dxr[j] = gx;
			float nd = n * d;
			dw[j] += nd;
		}
	}
}
