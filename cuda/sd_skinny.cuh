/*
 * sd_skinny.cuh: the project's own GEMM kernels for one dimension of at most
 * SDC_SKINNY_MAX (sd_compute_skinny.cu), which the GEMM tuner
 * (sd_compute_lt.cu) validates and times beside cuBLASLt's algorithms.
 */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "symddp_compute.h"

#define SDC_SKINNY_MAX 16

enum { SDC_SKINNY_NONE = 0, SDC_SKINNY_N = 1, SDC_SKINNY_K = 2 };

/* Which own kernel can run the plan g describes (SDC_SKINNY_NONE: none). */
int sdc_skinny_kind(const sdc_lt_args *g);
/* Enqueues it on st for operands a, b and c (the epilogue's pointers from g). */
cudaError_t sdc_skinny_launch(int kind, const sdc_lt_args *g, int sm_count, const void *a, const void *b, void *c,
                              cudaStream_t st);
/* Fills words 32-bit words at p with pseudo-random floats in [-1, 1) (floats)
 * or bits, from seed. */
cudaError_t sdc_fill_random(void *p, int64_t words, uint32_t seed, int floats, cudaStream_t st);
