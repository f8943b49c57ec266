//go:build cgo

// The C loops of optimizer.go: each element's IEEE float operations in the Go
// loops' order. elementwise.c compiles them once per instruction set.

static void SDH_NAME(sgd)(float *p, const float *g, float lr, float wd, long n) {
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
static void SDH_NAME(sgd_momentum)(float *p, const float *g, float *buf, float lr, float wd,
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
// pass -fno-math-errno), so where elementwise.c defines SDH_VF (a vector
// of floats) and SDH_VSQRT the loop runs on those vectors, with the same
// operations.
static void SDH_NAME(adam)(float *p, const float *g, float *m, float *v, float decay, float l2,
                           float b1, float b2, float c1, float c2, float eps, float step_size,
                           float bc2, long n) {
	const int l2on = l2 != 0.0f;
	long i = 0;
#ifdef SDH_VF
	const long w = (long)(sizeof(SDH_VF) / sizeof(float));
	for (; i + w <= n; i += w) {
		SDH_VF pi, gi, mi, vi;
		memcpy(&pi, p + i, sizeof pi);
		memcpy(&gi, g + i, sizeof gi);
		memcpy(&mi, m + i, sizeof mi);
		memcpy(&vi, v + i, sizeof vi);
		pi = pi * decay;
		if (l2on) gi = gi + l2 * pi;
		mi = b1 * mi + c1 * gi;
		vi = b2 * vi + (c2 * gi) * gi;
		SDH_VF den = SDH_VSQRT(vi) / bc2 + eps;
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
