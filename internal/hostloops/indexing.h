//go:build cgo

// The C loops of indexing.go: each element's IEEE float operations in the Go
// loops' order. rows.c compiles them once per instruction set.

// Indices were checked by the Go caller: each is -1 or a row of table.
static void SDH_NAME(gather_rows)(float *restrict dst, const float *restrict table, const int32_t *idx,
                                  long n, long c, int accumulate) {
	for (long i = 0; i < n; i++) {
		float *row = dst + i * c;
		const long k = idx[i];
		if (k < 0) {
			if (!accumulate) memset(row, 0, (size_t)c * sizeof *row);
			continue;
		}
		const float *src = table + k * c;
		if (!accumulate) {
			memcpy(row, src, (size_t)c * sizeof *row);
			continue;
		}
		for (long j = 0; j < c; j++) row[j] += src[j];
	}
}

static void SDH_NAME(scatter_add_rows)(float *restrict table, const float *restrict src, const int32_t *idx,
                                       long n, long c) {
	for (long i = 0; i < n; i++) {
		const long k = idx[i];
		if (k < 0) continue;
		float *row = table + k * c;
		const float *s = src + i * c;
		for (long j = 0; j < c; j++) row[j] += s[j];
	}
}
