//go:build cgo

// The C loops of gelu.go: each element's IEEE float operations in the Go
// loops' order. rows.c compiles them once per instruction set.

// gelu_exp_arg_ is geluExpArg of gelu.go: -2u, u = √(2/π)·(v+0.044715·v³).
static inline float SDH_NAME(gelu_exp_arg_)(float v) {
	float z = v * v;
	z = z * v;
	z = v + 0.044715f * z;
	return -1.5957691216057308f * z;
}

static void SDH_NAME(gelu)(float *y, const float *x, long n) {
	for (long i = 0; i < n; i++) {
		float v = x[i];
		float e = SDH_NAME(exp_)(SDH_NAME(gelu_exp_arg_)(v));
		float s = 1.0f / (1.0f + e);
		y[i] = v * s;
	}
}

// dx may be dy: each element is read before it is written.
static void SDH_NAME(gelu_backward)(float *dx, const float *dy, const float *x, long n) {
	for (long i = 0; i < n; i++) {
		float v = x[i];
		float a = 0.134145f * (v * v) + 1.0f;
		float e = SDH_NAME(exp_)(SDH_NAME(gelu_exp_arg_)(v));
		float s = 1.0f / (1.0f + e);
		float q = s * e;
		q = q * s;
		q = q * v;
		q = q * a;
		q = 1.5957691216057308f * q;
		dx[i] = dy[i] * (s + q);
	}
}
