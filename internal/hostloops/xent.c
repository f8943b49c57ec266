//go:build cgo

// The classifier's softmax cross-entropy over one row (SoftmaxXentRow in
// crossentropy.go) with its exponentials four at a time in AVX2 and FMA.
// Each exponential is the one Go's math.Exp computes on a processor with
// FMA (the runtime's exp_amd64.s: Shibata's reduction by ln 2 in two
// parts, a Taylor polynomial of the argument over 16, four squarings,
// the power of two), the same IEEE double operations in the same order,
// so every bit equals the Go loop's; the sum is taken element by element
// in order, as the Go loop sums. A row with an exponent that the fast
// path does not take (an element more than about 708 below the row's
// maximum, which Go scales as a subnormal, or a NaN or infinity) is
// left to the Go loop.

#include "dispatch.h"

#if defined(__x86_64__)
#include <immintrin.h>

static int sdh_fma = -1;

// sdh_xent_fast says whether this path runs here: AVX2 loops in use and
// FMA, which Go's math.Exp uses where the processor has it (with AVX).
int sdh_xent_fast(void) {
	if (sdh_fma < 0) {
		__builtin_cpu_init();
		sdh_fma = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
	}
	return sdh_fma && sdh_avx2;
}

__attribute__((target("avx2,fma"))) static int exp4(const float *x, double m, __m256d *out, __m128 *outf) {
	const __m256d log2e = _mm256_set1_pd(1.4426950408889634073599246810018920);
	const __m256d ln2u = _mm256_set1_pd(0.69314718055966295651160180568695068359375);
	const __m256d ln2l = _mm256_set1_pd(0.28235290563031577122588448175013436025525412068e-12);
	__m256d d = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x)), _mm256_set1_pd(m));
	__m128i e = _mm256_cvtpd_epi32(_mm256_mul_pd(log2e, d)); // rounded to nearest, as CVTSD2SL
	// 2^e must be a normal double (e + 1023 >= 1): else Go's subnormal path.
	if (_mm_movemask_epi8(_mm_cmpgt_epi32(_mm_set1_epi32(-1022), e)) != 0) {
		return 0;
	}
	__m256d fe = _mm256_cvtepi32_pd(e);
	d = _mm256_fnmadd_pd(ln2u, fe, d);
	d = _mm256_fnmadd_pd(ln2l, fe, d);
	d = _mm256_mul_pd(d, _mm256_set1_pd(0.0625));
	__m256d p = _mm256_set1_pd(2.4801587301587301587e-5);
	p = _mm256_fmadd_pd(p, d, _mm256_set1_pd(1.9841269841269841270e-4));
	p = _mm256_fmadd_pd(p, d, _mm256_set1_pd(1.3888888888888888889e-3));
	p = _mm256_fmadd_pd(p, d, _mm256_set1_pd(8.3333333333333333333e-3));
	p = _mm256_fmadd_pd(p, d, _mm256_set1_pd(4.1666666666666666667e-2));
	p = _mm256_fmadd_pd(p, d, _mm256_set1_pd(1.6666666666666666667e-1));
	p = _mm256_fmadd_pd(p, d, _mm256_set1_pd(0.5));
	p = _mm256_fmadd_pd(p, d, _mm256_set1_pd(1.0));
	const __m256d two = _mm256_set1_pd(2.0);
	d = _mm256_mul_pd(d, p);
	d = _mm256_mul_pd(d, _mm256_add_pd(d, two));
	d = _mm256_mul_pd(d, _mm256_add_pd(d, two));
	d = _mm256_mul_pd(d, _mm256_add_pd(d, two));
	d = _mm256_fmadd_pd(d, _mm256_add_pd(d, two), _mm256_set1_pd(1.0));
	__m256i bits = _mm256_slli_epi64(_mm256_cvtepi32_epi64(_mm_add_epi32(e, _mm_set1_epi32(1023))), 52);
	*out = _mm256_mul_pd(d, _mm256_castsi256_pd(bits));
	*outf = _mm256_cvtpd_ps(*out);
	return 1;
}

// sdh_xent_row writes g = softmax(x) * scale (the label's -scale is the
// caller's) for a row of n >= 1 logits and returns the index of its first
// maximum, the maximum in *m and the sum of exp(x - max) in *sum; -1 when
// the row is the Go loop's (see above; g may be partly written then), or
// when this path does not run here.
__attribute__((target("avx2,fma"))) long sdh_xent_row(const float *x, float *g, long n, float scale, double *m,
                                                      double *sum) {
	if (!sdh_xent_fast()) {
		return -1;
	}
	long best = 0;
	for (long j = 1; j < n; j++) {
		if (x[j] > x[best]) {
			best = j;
		}
	}
	const double mx = (double)x[best];
	double s = 0, lanes[4];
	__m256d p;
	__m128 pf;
	long j = 0;
	for (; j + 4 <= n; j += 4) {
		if (!exp4(x + j, mx, &p, &pf)) {
			return -1;
		}
		_mm_storeu_ps(g + j, pf);
		_mm256_storeu_pd(lanes, p);
		s += lanes[0];
		s += lanes[1];
		s += lanes[2];
		s += lanes[3];
	}
	if (j < n) { // the last 1-3, beside copies of the maximum (exp 0)
		float tail[4] = {x[best], x[best], x[best], x[best]};
		memcpy(tail, x + j, (size_t)(n - j) * sizeof(float));
		if (!exp4(tail, mx, &p, &pf)) {
			return -1;
		}
		float tf[4];
		_mm_storeu_ps(tf, pf);
		_mm256_storeu_pd(lanes, p);
		for (long k = 0; k < n - j; k++) {
			g[j + k] = tf[k];
			s += lanes[k];
		}
	}
	const __m256d inv = _mm256_set1_pd((double)scale / s);
	j = 0;
	for (; j + 4 <= n; j += 4) {
		_mm_storeu_ps(g + j, _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(g + j)), inv)));
	}
	for (; j < n; j++) {
		g[j] = (float)((double)g[j] * ((double)scale / s));
	}
	*m = mx;
	*sum = s;
	return best;
}

#else

int sdh_xent_fast(void) { return 0; }
long sdh_xent_row(const float *x, float *g, long n, float scale, double *m, double *sum) { return -1; }

#endif
