//go:build cgo

// The C loops of SwiGLU's element-wise part (llama.go): each element's IEEE
// float operations in the Go loops' order. rows.c compiles them once per
// instruction set.

static void SDH_NAME(swiglu)(float *y, const float *a, const float *b, long n) {
	for (long i = 0; i < n; i++) {
		float v = a[i];
		float s = 1.0f / (1.0f + SDH_NAME(exp_)(-v));
		float p = v * s;
		y[i] = p * b[i];
	}
}

// da may be dy: each element of dy is read before da's is written; db may
// not.
static void SDH_NAME(swiglu_backward)(float *da, float *db, const float *dy, const float *a, const float *b,
                                      long n) {
	for (long i = 0; i < n; i++) {
		float v = a[i];
		float e = SDH_NAME(exp_)(-v);
		float s = 1.0f / (1.0f + e);
		float d = dy[i];
		float p = v * s;
		db[i] = p * d;
		float q = e * s;
		q = q * s;
		q = q * v;
		float g = d * b[i];
		da[i] = g * (s + q);
	}
}
