//go:build cgo

// The C loops, compiled once per instruction set by tfm.c, which defines
// SDT_NAME(f) to give each copy its own names. Every element goes through
// the same IEEE float operations, in the same order, as the Go loops of
// loops.go; tfm.c turns off floating-point contraction. The reductions keep
// sum8's eight lanes in one sdt_v8 (two SSE registers on the baseline
// target, one AVX register with AVX2), so their order is the Go order on
// every target; the element-wise passes are plain loops that the compiler
// vectorises.

// exp_ is exp32 of loops.go.
static inline float SDT_NAME(exp_)(float x) {
	x = x > 88.0f ? 88.0f : x;
	x = x < -88.0f ? -88.0f : x;
	float t = x * 1.4426950408889634f + 12582912.0f;
	float n = t - 12582912.0f;
	float r = x - n * 0.693359375f;
	r = r - n * -2.12194440054690583e-4f;
	// Estrin's scheme: the terms pair up, so the chain of dependent
	// operations is half of Horner's.
	float r2 = r * r;
	float a0 = r + 1.0f;
	float a1 = r * (1.0f / 6.0f) + 0.5f;
	float a2 = r * (1.0f / 120.0f) + 1.0f / 24.0f;
	float a3 = r * (1.0f / 5040.0f) + 1.0f / 720.0f;
	float b0 = r2 * a1 + a0;
	float b1 = r2 * a3 + a2;
	float r4 = r2 * r2;
	float p = r4 * b1 + b0;
	uint32_t tb;
	memcpy(&tb, &t, sizeof tb);
	uint32_t sb = (uint32_t)((int32_t)(tb - 0x4b400000u) + 127) << 23;
	float scale;
	memcpy(&scale, &sb, sizeof scale);
	return p * scale;
}

// hsum8 combines the lanes as sum8 does.
static inline float SDT_NAME(hsum8)(const sdt_v8 *v) {
	const sdt_v8 a = *v;
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// sum8_ is sum8 of loops.go.
static inline float SDT_NAME(sum8_)(const float *x, long n) {
	sdt_v8 a = {0};
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		sdt_v8 q;
		memcpy(&q, x + i, sizeof q);
		a += q;
	}
	float s = SDT_NAME(hsum8)(&a);
	for (; i < n; i++) s += x[i];
	return s;
}

// max8_ is max8 of loops.go: a lane takes v where v > its maximum.
static inline float SDT_NAME(max8_)(const float *x, long n) {
	sdt_v8 m = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		sdt_v8 q;
		memcpy(&q, x + i, sizeof q);
		sdt_vi8 gt = q > m;
		m = (sdt_v8)(((sdt_vi8)q & gt) | ((sdt_vi8)m & ~gt));
	}
	float r = m[0];
	for (; i < n; i++) r = x[i] > r ? x[i] : r;
	for (int j = 1; j < 8; j++) r = m[j] > r ? m[j] : r;
	return r;
}

static void SDT_NAME(layernorm)(float *y, float *mean, float *rstd, const float *x, const float *w,
                                const float *b, long rows, long c, float eps) {
	const float fc = (float)c;
	for (long i = 0; i < rows; i++) {
		const float *xr = x + i * c;
		float *yr = y + i * c;
		const float m = SDT_NAME(sum8_)(xr, c) / fc;
		sdt_v8 a = {0};
		long j = 0;
		for (; j + 8 <= c; j += 8) {
			sdt_v8 q;
			memcpy(&q, xr + j, sizeof q);
			q = q - m;
			a += q * q;
		}
		float s = SDT_NAME(hsum8)(&a);
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
static inline void SDT_NAME(layernorm_dx)(float *restrict dxr, float *restrict dw, float *restrict db,
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

static void SDT_NAME(layernorm_backward)(float *dx, float *dw, float *db, const float *dy, const float *x,
                                         const float *w, const float *mean, const float *rstd, long rows,
                                         long c, int add_dx) {
	const float fc = (float)c;
	for (long i = 0; i < rows; i++) {
		const float *xr = x + i * c, *dyr = dy + i * c;
		float *dxr = dx + i * c;
		const float m = mean[i], rs = rstd[i];
		sdt_v8 a = {0}, bb = {0};
		long j = 0;
		for (; j + 8 <= c; j += 8) {
			sdt_v8 q, g, wq;
			memcpy(&q, xr + j, sizeof q);
			memcpy(&g, dyr + j, sizeof g);
			memcpy(&wq, w + j, sizeof wq);
			g = wq * g;
			a += g;
			bb += g * ((q - m) * rs);
		}
		float sg = SDT_NAME(hsum8)(&a), sgn = SDT_NAME(hsum8)(&bb);
		for (; j < c; j++) {
			float g = w[j] * dyr[j];
			sg += g;
			sgn += g * ((xr[j] - m) * rs);
		}
		SDT_NAME(layernorm_dx)(dxr, dw, db, dyr, xr, w, m, rs, sg / fc, sgn / fc, c, add_dx);
	}
}

static void SDT_NAME(gelu)(float *y, const float *x, long n) {
	for (long i = 0; i < n; i++) {
		float v = x[i];
		float z = v * v;
		z = z * v;
		z = v + 0.044715f * z;
		float e = SDT_NAME(exp_)(-1.5957691216057308f * z);
		float s = 1.0f / (1.0f + e);
		y[i] = v * s;
	}
}

// dx may be dy: each element is read before it is written.
static void SDT_NAME(gelu_backward)(float *dx, const float *dy, const float *x, long n) {
	for (long i = 0; i < n; i++) {
		float v = x[i];
		float z = v * v;
		float a = 0.134145f * z + 1.0f;
		z = z * v;
		z = v + 0.044715f * z;
		float e = SDT_NAME(exp_)(-1.5957691216057308f * z);
		float s = 1.0f / (1.0f + e);
		float q = s * e;
		q = q * s;
		q = q * v;
		q = q * a;
		q = 1.5957691216057308f * q;
		dx[i] = dy[i] * (s + q);
	}
}

static void SDT_NAME(softmax_causal)(float *p, long ld, long r0, long rows, long width) {
	for (long i = 0; i < rows; i++) {
		const long n = r0 + i + 1;
		float *v = p + i * ld;
		const float m = SDT_NAME(max8_)(v, n);
		const long np = (n + 7) / 8 * 8 < width ? (n + 7) / 8 * 8 : width;
		for (long j = 0; j < np; j++) v[j] = SDT_NAME(exp_)(v[j] - m);
		for (long j = n; j < width; j++) v[j] = 0.0f;
		const float inv = 1.0f / SDT_NAME(sum8_)(v, np);
		for (long j = 0; j < n; j++) v[j] *= inv;
	}
}

static void SDT_NAME(softmax_causal_backward)(float *ds, const float *p, long ld, long r0, long rows,
                                              long width) {
	for (long i = 0; i < rows; i++) {
		const long n = r0 + i + 1;
		float *g = ds + i * ld;
		const float *pr = p + i * ld;
		sdt_v8 a = {0};
		long j = 0;
		for (; j + 8 <= n; j += 8) {
			sdt_v8 q, d;
			memcpy(&q, pr + j, sizeof q);
			memcpy(&d, g + j, sizeof d);
			a += q * d;
		}
		float s = SDT_NAME(hsum8)(&a);
		for (; j < n; j++) s += pr[j] * g[j];
		for (j = 0; j < n; j++) g[j] = pr[j] * (g[j] - s);
		for (j = n; j < width; j++) g[j] = 0.0f;
	}
}

// Indices were checked by the Go caller: each is -1 or a row of table.
static void SDT_NAME(gather_rows)(float *restrict dst, const float *restrict table, const int32_t *idx,
                                  long n, long c, int accumulate) {
	for (long i = 0; i < n; i++) {
		float *row = dst + i * c;
		const long k = idx[i];
		if (k < 0) {
			if (!accumulate) memset(row, 0, (size_t)c * sizeof *row);
			continue;
		}
		const float *src = table + k * c;
		if (!accumulate) {
			memcpy(row, src, (size_t)c * sizeof *row);
			continue;
		}
		for (long j = 0; j < c; j++) row[j] += src[j];
	}
}

static void SDT_NAME(scatter_add_rows)(float *restrict table, const float *restrict src, const int32_t *idx,
                                       long n, long c) {
	for (long i = 0; i < n; i++) {
		const long k = idx[i];
		if (k < 0) continue;
		float *row = table + k * c;
		const float *s = src + i * c;
		for (long j = 0; j < c; j++) row[j] += s[j];
	}
}
