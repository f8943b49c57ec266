/*
 * sd_reduce.cuh: the fixed-order sum of squares that the gradient check
 * (sd_compute_optim.cu) and sdc_sum_squares (sd_compute_vec.cu) share.
 *
 * Phase 1: thread t of block b squares elements b*T+t, +G*T, ... in index
 * order (in double: each square of a float is exact), the block adds its
 * threads in a fixed tree and writes partial[b]. Phase 2: the last block to
 * take a ticket adds the G partials: thread t takes partials t, t+T, ... in
 * order, then the same tree. Every addition's order depends only on n, G and
 * T, so every run and every PE gets the same bits, without float atomics.
 * (Before, one thread of the last block added the partials one after
 * another: about a thousand dependent L2 loads, tens of microseconds.)
 */
#pragma once

#include <stdint.h>

/* Sums v over the block (blockDim.x a power of two) in a fixed tree order;
 * every thread gets the total. s holds blockDim.x doubles of shared memory.
 * Every thread of the block must call it. */
static __device__ __forceinline__ double sdc_block_sum(double v, double *s) {
    __syncthreads(); /* s may still be read from a previous call */
    s[threadIdx.x] = v;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    return s[0];
}

/*
 * Both phases over x (n floats). Returns true in the one thread (thread 0
 * of the last block) that holds the total in *total; the ticket word is
 * reset for the next launch. partial holds gridDim.x doubles. s holds
 * blockDim.x doubles of shared memory.
 */
static __device__ __forceinline__ bool sdc_sum_squares_grid(const float *__restrict__ x, int64_t n,
                                                            double *partial, uint32_t *ticket_word,
                                                            double *s, double *total) {
    __shared__ uint32_t ticket;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    double acc = 0.0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
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
