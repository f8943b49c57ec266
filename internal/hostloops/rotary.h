//go:build cgo

// The C loop of the rotary embedding (llama.go's Rotate): each pair's IEEE
// float operations in the Go loop's order. rows.c compiles it once per
// instruction set.

// y and x may be the same rows (in place): each pair is read before it is
// written.
static void SDH_NAME(rotate)(float *y, const float *x, const float *cos_t, const float *sin_t, long rows,
                             long width, long ld, long hs, long t, int inverse) {
	const long half = hs / 2;
	for (long r = 0; r < rows; r++) {
		const long p = r % t;
		const float *c = cos_t + p * half, *s = sin_t + p * half;
		const float *xr = x + r * ld;
		float *yr = y + r * ld;
		for (long h = 0; h < width; h += hs) {
			for (long i = 0; i < half; i++) {
				float a = xr[h + i], b = xr[h + half + i];
				float ci = c[i], si = inverse ? -s[i] : s[i];
				float p0 = a * ci, q0 = b * si;
				float p1 = b * ci, q1 = a * si;
				yr[h + i] = p0 - q0;
				yr[h + half + i] = p1 + q1;
			}
		}
	}
}
