/*
 * sd_skinny.cuh: the project's own GEMM kernels, which the GEMM tuner
 * (sd_compute_lt.cu) validates and times beside cuBLASLt's algorithms: for
 * one dimension of at most SDC_SKINNY_MAX (sd_compute_skinny.cu), and a tiled
 * one for small products of any shape (sd_compute_tiled.cu).
 */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "symddp_compute.h"

#define SDC_SKINNY_MAX 16

enum { SDC_SKINNY_NONE = 0, SDC_SKINNY_N = 1, SDC_SKINNY_K = 2, SDC_OWN_TILED = 3 };

/* Which own kernel can run the plan g describes (SDC_SKINNY_NONE: none). */
int sdc_skinny_kind(const sdc_lt_args *g);
/* Enqueues it on st for operands a, b and c (the epilogue's pointers from g). */
cudaError_t sdc_skinny_launch(int kind, const sdc_lt_args *g, int sm_count, const void *a, const void *b, void *c,
                              cudaStream_t st);
/* Fills words 32-bit words at p with pseudo-random floats in [-1, 1) (floats)
 * or bits, from seed. */
cudaError_t sdc_fill_random(void *p, int64_t words, uint32_t seed, int floats, cudaStream_t st);

/* Whether the tiled kernel can run the plan g describes (small enough). */
bool sdc_tiled_fits(const sdc_lt_args *g);
/* The largest split of k over blocks worth trying for it on sm_count SMs
 * (1: none). */
int sdc_tiled_max_split(const sdc_lt_args *g, int sm_count);
/* Bytes of device scratch, zeroed once, that a plan must own to run it with
 * splits up to split (0: none needed). */
int64_t sdc_tiled_scratch_bytes(const sdc_lt_args *g, int split);
/* Enqueues it on st for operands a, b and c with k split over split blocks
 * a tile, with the plan's scratch (scratch_bytes of it). */
cudaError_t sdc_tiled_launch(const sdc_lt_args *g, int split, void *scratch, int64_t scratch_bytes, const void *a,
                             const void *b, void *c, cudaStream_t st);
