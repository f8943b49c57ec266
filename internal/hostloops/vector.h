//go:build cgo

// The C loops of vector.go: each element's IEEE float operations in the Go
// loops' order. elementwise.c compiles them once per instruction set.

static void SDH_NAME(sum2)(float *d, const float *a, const float *b, long n) {
	for (long i = 0; i < n; i++) d[i] = a[i] + b[i];
}

static void SDH_NAME(acc1)(float *d, const float *a, long n) {
	for (long i = 0; i < n; i++) d[i] += a[i];
}

static void SDH_NAME(acc2)(float *d, const float *a, const float *b, long n) {
	for (long i = 0; i < n; i++) d[i] = (d[i] + a[i]) + b[i];
}

static void SDH_NAME(scale)(float *x, float s, long n) {
	for (long i = 0; i < n; i++) x[i] *= s;
}

static int SDH_NAME(all_finite)(const float *x, long n) {
	uint32_t bad = 0;
	for (long i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &x[i], sizeof u);
		bad |= (u & 0x7f800000u) == 0x7f800000u;
	}
	return !bad;
}
