//go:build cgo

// The C loops of attention.go: each element's IEEE float operations in the Go
// loops' order. rows.c compiles them once per instruction set.

static void SDH_NAME(softmax_causal)(float *p, long ld, long r0, long rows, long width) {
	for (long i = 0; i < rows; i++) {
		const long n = r0 + i + 1;
		float *v = p + i * ld;
		const float m = SDH_NAME(max8_)(v, n);
		const long np = (n + 7) / 8 * 8 < width ? (n + 7) / 8 * 8 : width;
		for (long j = 0; j < np; j++) v[j] = SDH_NAME(exp_)(v[j] - m);
		for (long j = n; j < width; j++) v[j] = 0.0f;
		const float inv = 1.0f / SDH_NAME(sum8_)(v, np);
		for (long j = 0; j < n; j++) v[j] *= inv;
	}
}

static void SDH_NAME(softmax_causal_backward)(float *ds, const float *p, long ld, long r0, long rows,
                                              long width) {
	for (long i = 0; i < rows; i++) {
		const long n = r0 + i + 1;
		float *g = ds + i * ld;
		const float *pr = p + i * ld;
		sdh_v8 a = {0};
		long j = 0;
		for (; j + 8 <= n; j += 8) {
			sdh_v8 q, d;
			memcpy(&q, pr + j, sizeof q);
			memcpy(&d, g + j, sizeof d);
			a += q * d;
		}
		float s = SDH_NAME(hsum8)(&a);
		for (; j < n; j++) s += pr[j] * g[j];
		for (j = 0; j < n; j++) g[j] = pr[j] * (g[j] - s);
		for (j = n; j < width; j++) g[j] = 0.0f;
	}
}
