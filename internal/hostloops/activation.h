//go:build cgo

// The C loops of activation.go: each element's IEEE float operations in the Go
// loops' order. elementwise.c compiles them once per instruction set.

// y <= 0 is false for NaN, so NaN gradients pass, as in the Go loop.
static void SDH_NAME(relu_mask)(float *d, const float *y, long n) {
	for (long i = 0; i < n; i++) d[i] = y[i] <= 0.0f ? 0.0f : d[i];
}

// r <= 0 ? +0 : r is Go's max(r, 0): NaN stays, -0 becomes +0.
static void SDH_NAME(bias_act)(float *y, const float *bias, long rows, long n, int relu) {
	for (long i = 0; i < rows; i++) {
		float *row = y + i * n;
		if (bias && relu) {
			for (long j = 0; j < n; j++) {
				float r = row[j] + bias[j];
				row[j] = r <= 0.0f ? 0.0f : r;
			}
		} else if (bias) {
			for (long j = 0; j < n; j++) row[j] += bias[j];
		} else if (relu) {
			for (long j = 0; j < n; j++) row[j] = row[j] <= 0.0f ? 0.0f : row[j];
		}
	}
}

static void SDH_NAME(col_sums)(float *s, const float *d, long rows, long n) {
	for (long i = 0; i < rows; i++) {
		const float *row = d + i * n;
		for (long j = 0; j < n; j++) s[j] += row[j];
	}
}
