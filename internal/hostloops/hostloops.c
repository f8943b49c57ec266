//go:build cgo

// The instruction set of the C loops, picked once at start-up: AVX2 where
// the processor has it (on x86-64), the baseline otherwise.

#include "dispatch.h"

int sdh_avx2;
static int sdh_has_avx2;

const char *sdh_init(void) {
#if defined(__x86_64__)
	__builtin_cpu_init();
	sdh_has_avx2 = sdh_avx2 = __builtin_cpu_supports("avx2");
	return sdh_avx2 ? "avx2" : "x86-64";
#else
	return "portable";
#endif
}

// sdh_use_base makes the loops the baseline ones (on), or the best ones
// again (off): for the tests, which compare both with the Go loops.
void sdh_use_base(int on) { sdh_avx2 = on ? 0 : sdh_has_avx2; }
