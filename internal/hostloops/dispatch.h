//go:build cgo

// What the C files of the package share: the floating-point rule, the
// vector types, and the instruction-set switch that hostloops.c sets and
// the entry points of elementwise.c and rows.c read.
#ifndef SYMDDP_HOSTLOOPS_DISPATCH_H
#define SYMDDP_HOSTLOOPS_DISPATCH_H

// No multiply may be fused into an add: the Go loops round every product.
// (It is the default of GNU C where the target has FMA instructions;
// neither target here enables them, and this keeps it so if one ever
// does.) cgo does not pass -ffp-contract=off.
#pragma GCC optimize("fp-contract=off")
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hostloops.h"

// Four and eight floats: the element-wise loops' vectors, and the eight
// lanes of the row loops' sums (sum8 in lanes.go).
typedef float sdh_v4 __attribute__((vector_size(16)));
typedef float sdh_v8 __attribute__((vector_size(32)));
typedef int32_t sdh_vi8 __attribute__((vector_size(32)));

// sdh_avx2 says which copy of the loops runs: the AVX2 one (1) or the
// baseline one (0). hostloops.c sets it.
extern int sdh_avx2 __attribute__((visibility("hidden")));

// SDH_CALL(f, ...) calls the copy of loop f that sdh_avx2 picks; each .c
// file compiles its loops once per instruction set, naming the copies
// sdh_<f>_base and sdh_<f>_avx2 through SDH_NAME.
#if defined(__x86_64__)
#define SDH_CALL(f, ...) (sdh_avx2 ? sdh_##f##_avx2(__VA_ARGS__) : sdh_##f##_base(__VA_ARGS__))
#else
#define SDH_CALL(f, ...) sdh_##f##_base(__VA_ARGS__)
#endif

#endif
