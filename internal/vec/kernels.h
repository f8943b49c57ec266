//go:build cgo

// The C loops, compiled once per instruction set by vec.c, which defines
// SDV_NAME(f) to give each copy its own names. Every element goes through
// the same IEEE float operations, in the same order, as the Go loops of
// loops.go; vec.c turns off floating-point contraction, so no multiply is
// fused into an add. Pointers may alias only where the Go callers let them
// (dst may be an input of none of these).

static void SDV_NAME(sum2)(float *d, const float *a, const float *b, long n) {
	for (long i = 0; i < n; i++) d[i] = a[i] + b[i];
}

static void SDV_NAME(acc1)(float *d, const float *a, long n) {
	for (long i = 0; i < n; i++) d[i] += a[i];
}

static void SDV_NAME(acc2)(float *d, const float *a, const float *b, long n) {
	for (long i = 0; i < n; i++) d[i] = (d[i] + a[i]) + b[i];
}

static void SDV_NAME(scale)(float *x, float s, long n) {
	for (long i = 0; i < n; i++) x[i] *= s;
}

static int SDV_NAME(all_finite)(const float *x, long n) {
	uint32_t bad = 0;
	for (long i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &x[i], sizeof u);
		bad |= (u & 0x7f800000u) == 0x7f800000u;
	}
	return !bad;
}

// y <= 0 is false for NaN, so NaN gradients pass, as in the Go loop.
static void SDV_NAME(relu_mask)(float *d, const float *y, long n) {
	for (long i = 0; i < n; i++) d[i] = y[i] <= 0.0f ? 0.0f : d[i];
}

// r <= 0 ? +0 : r is Go's max(r, 0): NaN stays, -0 becomes +0.
static void SDV_NAME(bias_act)(float *y, const float *bias, long rows, long n, int relu) {
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

static void SDV_NAME(col_sums)(float *s, const float *d, long rows, long n) {
	for (long i = 0; i < rows; i++) {
		const float *row = d + i * n;
		for (long j = 0; j < n; j++) s[j] += row[j];
	}
}

static void SDV_NAME(sgd)(float *p, const float *g, float lr, float wd, long n) {
	if (wd != 0.0f) {
		for (long i = 0; i < n; i++) {
			float gi = g[i] + wd * p[i];
			p[i] = p[i] - lr * gi;
		}
	} else {
		for (long i = 0; i < n; i++) p[i] = p[i] - lr * g[i];
	}
}

// The Go loop adds wd·p only when wd != 0: adding +0·p would turn a -0
// gradient into +0 and an Inf parameter's gradient into NaN.
static void SDV_NAME(sgd_momentum)(float *p, const float *g, float *buf, float lr, float wd,
                                   float mu, int nesterov, int first, long n) {
	const int decay = wd != 0.0f;
	for (long i = 0; i < n; i++) {
		float pi = p[i];
		float gi = decay ? g[i] + wd * pi : g[i];
		float b = first ? gi : mu * buf[i] + gi;
		buf[i] = b;
		float dir = nesterov ? gi + mu * b : b;
		p[i] = pi - lr * dir;
	}
}

// Adam and AdamW (decay: AdamW's decoupled factor, 1 for Adam; l2: Adam's
// L2 weight decay, 0 for AdamW). The square root is IEEE's correctly rounded
// one, the bits of Go's float32(math.Sqrt(float64(v))). The compiler will
// not vectorise a loop that calls sqrtf (it may set errno, and cgo does not
// pass -fno-math-errno), so where vec.c defines SDV_VF (a vector of floats)
// and SDV_VSQRT the loop runs on those vectors, with the same operations.
static void SDV_NAME(adam)(float *p, const float *g, float *m, float *v, float decay, float l2,
                           float b1, float b2, float c1, float c2, float eps, float step_size,
                           float bc2, long n) {
	const int l2on = l2 != 0.0f;
	long i = 0;
#ifdef SDV_VF
	const long w = (long)(sizeof(SDV_VF) / sizeof(float));
	for (; i + w <= n; i += w) {
		SDV_VF pi, gi, mi, vi;
		memcpy(&pi, p + i, sizeof pi);
		memcpy(&gi, g + i, sizeof gi);
		memcpy(&mi, m + i, sizeof mi);
		memcpy(&vi, v + i, sizeof vi);
		pi = pi * decay;
		if (l2on) gi = gi + l2 * pi;
		mi = b1 * mi + c1 * gi;
		vi = b2 * vi + (c2 * gi) * gi;
		SDV_VF den = SDV_VSQRT(vi) / bc2 + eps;
		pi = pi - (step_size * mi) / den;
		memcpy(m + i, &mi, sizeof mi);
		memcpy(v + i, &vi, sizeof vi);
		memcpy(p + i, &pi, sizeof pi);
	}
#endif
	for (; i < n; i++) {
		float pi = p[i] * decay;
		float gi = l2on ? g[i] + l2 * pi : g[i];
		float mi = b1 * m[i] + c1 * gi;
		float vi = b2 * v[i] + (c2 * gi) * gi;
		m[i] = mi;
		v[i] = vi;
		float den = sqrtf(vi) / bc2 + eps;
		p[i] = pi - (step_size * mi) / den;
	}
}
