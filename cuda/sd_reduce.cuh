/*
 * sd_reduce.cuh: the fixed-order sum of squares that the gradient check
 * (sd_compute_optim.cu), sdc_sum_squares and sdc_sum_squares_enqueue
 * (sd_compute_vec.cu) share: the same kernel body and the same grid
 * (sdc_sum_squares_blocks), so that all three add the same squares in the
 * same order and a shard's sum is the gradient check's sum over that shard.
 *
 * Phase 1: thread t of block b squares elements b*T+t, +G*T, ... in index
 * order (in double: each square of a float is exact), the block adds its
 * threads in a fixed order (sdc_block_sum) and writes partial[b]. Phase 2: the last block to
 * take a ticket adds the G partials: thread t takes partials t, t+T, ... in
 * order, then the same block sum. Every addition's order depends only on n, G and
 * T, so every run and every PE gets the same bits, without float atomics.
 * (Before, one thread of the last block added the partials one after
 * another: about a thousand dependent L2 loads, tens of microseconds.)
 */
#pragma once

#include <stdint.h>

#include "sd_compute.cuh"
#include "symddp_compute.h"

/* Threads of a block of the sum of squares. */
#define SDC_SUMSQ_THREADS 256

/* Blocks of the sum of squares over n elements: two per SM at most (every
 * block takes a ticket with an atomic on one word, and a thousand of them,
 * one per 256 elements of a small model, queued on it for microseconds),
 * and no more than the context's scratch holds partials for. */
static inline unsigned sdc_sum_squares_blocks(const sdc_ctx *c, int64_t n) {
    int64_t g = sdc_grid(n, SDC_SUMSQ_THREADS, c->sm_count, 2);
    const int64_t room = c->scratch_bytes / (int64_t)sizeof(double);
    if (g > room) g = room;
    return (unsigned)g;
}

/* Sums v over a warp with an xor butterfly: every lane adds the same two
 * operands at every level (a + b and b + a are the same float), so every
 * lane ends with the same bits. */
static __device__ __forceinline__ double sdc_warp_sum(double v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* Sums v over the block (blockDim.x a multiple of 32, at most 1024) in a
 * fixed order: each warp's butterfly, then the warps' sums by the first
 * warp's butterfly (missing warps count as zero); every thread gets the
 * total. s holds at least 32 doubles of shared memory. Every thread of
 * the block must call it. Five shuffles and two barriers instead of a
 * shared-memory tree with a barrier per level. */
static __device__ __forceinline__ double sdc_block_sum(double v, double *s) {
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = sdc_warp_sum(v);
    __syncthreads(); /* s may still be read from a previous call */
    if (lane == 0) s[warp] = v;
    __syncthreads();
    double t = lane < warps ? s[lane] : 0.0;
    return sdc_warp_sum(t);
}

/*
 * Both phases over x (n floats). Returns true in the one thread (thread 0
 * of the last block) that holds the total in *total; the ticket word is
 * reset for the next launch. partial holds gridDim.x doubles. s holds
 * 32 doubles of shared memory.
 */
static __device__ __forceinline__ bool sdc_sum_squares_grid(const float *__restrict__ x, int64_t n,
                                                            double *partial, uint32_t *ticket_word,
                                                            double *s, double *total) {
    __shared__ uint32_t ticket;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    double acc = 0.0;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    /* eight loads in flight before their squares are added, in index order
     * as one at a time would add them (the same bits; one load at a time
     * left the check at about 1.8 TB/s) */
    for (; i + 7 * stride < n; i += 8 * stride) {
        float v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = x[i + k * stride];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const double d = (double)v[k];
            acc += d * d;
        }
    }
    for (; i < n; i += stride) {
        const double v = (double)x[i];
        acc += v * v;
    }
    const double blk = sdc_block_sum(acc, s);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = blk;
        __threadfence();
        ticket = atomicAdd(ticket_word, 1u);
    }
    __syncthreads();
    if (ticket != gridDim.x - 1) return false; /* the same for the whole block */
    __threadfence();
    double p = 0.0;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) p += __ldcg(&partial[b]);
    const double sum = sdc_block_sum(p, s);
    if (threadIdx.x != 0) return false;
    *ticket_word = 0;
    *total = sum;
    return true;
}
