//go:build cgo

// The C helpers of lanes.go: each element's IEEE float operations in the Go
// loops' order. rows.c compiles them once per instruction set.
// The reductions keep sum8's eight lanes in one sdh_v8 (two SSE registers
// on the baseline target, one AVX register with AVX2), so their order is
// the Go order on every target.

// exp_ is exp32 of lanes.go.
static inline float SDH_NAME(exp_)(float x) {
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
static inline float SDH_NAME(hsum8)(const sdh_v8 *v) {
	const sdh_v8 a = *v;
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// sum8_ is sum8 of lanes.go.
static inline float SDH_NAME(sum8_)(const float *x, long n) {
	sdh_v8 a = {0};
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		sdh_v8 q;
		memcpy(&q, x + i, sizeof q);
		a += q;
	}
	float s = SDH_NAME(hsum8)(&a);
	for (; i < n; i++) s += x[i];
	return s;
}

// max8_ is max8 of lanes.go: a lane takes v where v > its maximum.
static inline float SDH_NAME(max8_)(const float *x, long n) {
	sdh_v8 m = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		sdh_v8 q;
		memcpy(&q, x + i, sizeof q);
		sdh_vi8 gt = q > m;
		m = (sdh_v8)(((sdh_vi8)q & gt) | ((sdh_vi8)m & ~gt));
	}
	float r = m[0];
	for (; i < n; i++) r = x[i] > r ? x[i] : r;
	for (int j = 1; j < 8; j++) r = m[j] > r ? m[j] : r;
	return r;
}
