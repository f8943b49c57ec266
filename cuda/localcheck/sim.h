/*
 * sim.h: what the CPU simulations of cuda/ kernels (*_sim.cpp, run by
 * check.sh) share. A kernel file's part between two markers is copied into
 * an .inc that a simulation includes after this header; the CUDA keywords
 * become nothing, every CUDA thread is an OS thread and the blocks run one
 * after another (launch), so __syncthreads and __syncwarp are a barrier of
 * the block (a block that calls __syncwarp is one warp) and a shuffle goes
 * through a slot per thread between two barriers: every thread of a block
 * must reach it, as the kernels' do, and a thread that returns drops out of
 * the barrier. The round-to-nearest intrinsics are the plain operations
 * (built with -ffp-contract=off). Each simulation defines __shared__ and its
 * kernels' dynamic shared memory, and the asynchronous copies it uses, which
 * copy at once.
 */
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__

struct float4 {
    float x, y, z, w;
};
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct sim_idx {
    unsigned x;
};
thread_local sim_idx threadIdx, blockIdx;
static sim_idx blockDim, gridDim;
static std::barrier<> *sim_bar;
static uint64_t sim_slot[1024];

static inline void __syncthreads() { sim_bar->arrive_and_wait(); }
static inline void __syncwarp() { sim_bar->arrive_and_wait(); }
static inline void __threadfence() {}
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return std::sqrt(a); }

/* The value of thread src(t) of the block for every thread t. */
template <typename T>
static inline T sim_exchange(T v, unsigned src) {
    static_assert(sizeof(T) <= sizeof(uint64_t));
    std::memcpy(&sim_slot[threadIdx.x], &v, sizeof v);
    sim_bar->arrive_and_wait();
    T r;
    std::memcpy(&r, &sim_slot[src], sizeof r);
    sim_bar->arrive_and_wait();
    return r;
}
template <typename T>
static inline T __shfl_xor_sync(unsigned, T v, int lane_mask) {
    return sim_exchange(v, threadIdx.x ^ (unsigned)lane_mask);
}
template <typename T>
static inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
    return sim_exchange(v, (threadIdx.x & ~(unsigned)(width - 1)) + (unsigned)(src % width));
}

/* Runs kernel on blocks blocks of threads threads, one block after another. */
static void launch(unsigned blocks, unsigned threads, const std::function<void()> &kernel) {
    blockDim.x = threads;
    gridDim.x = blocks;
    for (unsigned b = 0; b < blocks; b++) {
        std::barrier<> bar(threads);
        sim_bar = &bar;
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < threads; t++)
            ts.emplace_back([&, t, b] {
                threadIdx.x = t;
                blockIdx.x = b;
                kernel();
                sim_bar->arrive_and_drop();
            });
        for (auto &t : ts) t.join();
    }
}
