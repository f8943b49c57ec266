//go:build cgo

// The C loops of SwiGLU's element-wise part (llama.go): each element's IEEE
// float operations in the Go loops' order. rows.c compiles them once per
// instruction set.

// y (rows, f) from ab (rows, 2f), each row of ab [a | b].
static void SDH_NAME(swiglu)(float *y, const float *ab, long rows, long f) {
	for (long r = 0; r < rows; r++, y += f, ab += 2 * f) {
		const float *a = ab, *b = ab + f;
		for (long i = 0; i < f; i++) {
			float v = a[i];
			float s = 1.0f / (1.0f + SDH_NAME(exp_)(-v));
			float p = v * s;
			y[i] = p * b[i];
		}
	}
}

// dab (rows, 2f), each row [da | db], from dy (rows, f) and ab (rows, 2f);
// dab overlaps nothing.
static void SDH_NAME(swiglu_backward)(float *dab, const float *dy, const float *ab, long rows, long f) {
	for (long r = 0; r < rows; r++, dab += 2 * f, dy += f, ab += 2 * f) {
		const float *a = ab, *b = ab + f;
		float *da = dab, *db = dab + f;
		for (long i = 0; i < f; i++) {
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
}
