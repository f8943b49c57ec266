/*
 * sd_flags.cuh: the flag protocol that synchronises the blocks of collective
 * kernels across PEs through symmetric memory (the protocol is described at
 * the top of sd_collectives.cu). Device code only; included by the .cu files
 * that launch flag-synchronised kernels.
 */
#ifndef SD_FLAGS_CUH
#define SD_FLAGS_CUH

#include "sd_internal.h"

/* The GPU's global nanosecond timer. */
static __device__ __forceinline__ uint64_t sd_globaltimer(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* A store that publishes everything this thread saw before it, at system scope. */
static __device__ __forceinline__ void sd_store_release_sys(uint64_t *p, uint64_t v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* A load after which this thread sees everything published before the value it read. */
static __device__ __forceinline__ uint64_t sd_load_acquire_sys(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/*
 * The epoch of this block for this kernel: the block's previous epoch plus
 * one. Block b of every kernel on every PE advances epochs[b] once per
 * collective, so block b of all PEs agree on the epoch of every collective.
 * Call from every thread of the block.
 */
static __device__ __forceinline__ uint64_t sd_block_epoch(const sd_sync &s) {
    __shared__ uint64_t epoch;
    if (threadIdx.x == 0) {
        epoch = s.epochs[blockIdx.x] + 1;
        s.epochs[blockIdx.x] = epoch;
    }
    __syncthreads();
    return epoch;
}

/* Records the first wait that gave up and tells the host through the mapped word. */
static __device__ __noinline__ void sd_give_up(const sd_sync &s, int phase, int peer, uint64_t epoch) {
    if (atomicCAS(&s.status->failed, 0, 1) == 0) {
        s.status->phase = phase;
        s.status->block = (int32_t)blockIdx.x;
        s.status->peer = peer;
        s.status->epoch = epoch;
        s.status->op = s.op;
        __threadfence_system();
    }
    *s.host_failed = 1;
    __threadfence_system();
}

/*
 * Barrier of block blockIdx.x across all PEs at phase. Every thread calls it.
 *   1. __syncthreads: the block's writes before the barrier are done;
 *   2. threads j < npes (strided): fence, then release-store epoch into slot
 *      [phase][block][me] of PE j's flag area;
 *   3. the same threads spin with acquire loads until this PE's slot
 *      [phase][block][j] reaches epoch, or the deadline passes, or another
 *      wait already gave up;
 *   4. __syncthreads_and: the block continues only if all peers arrived.
 * Returns false when the block must stop (a wait gave up).
 */
static __device__ __forceinline__ bool sd_block_barrier(const sd_sync &s, int phase, uint64_t epoch) {
    __syncthreads();
    const int b = (int)blockIdx.x;
    for (int j = (int)threadIdx.x; j < s.npes; j += (int)blockDim.x) {
        __threadfence_system();
        sd_store_release_sys(s.peer_flags[j] + sd_flag_index(phase, b, s.me, s.npes), epoch);
    }
    int ok = 1;
    for (int j = (int)threadIdx.x; ok && j < s.npes; j += (int)blockDim.x) {
        const uint64_t *slot = s.my_flags + sd_flag_index(phase, b, j, s.npes);
        if (sd_load_acquire_sys(slot) >= epoch) continue;
        const uint64_t start = sd_globaltimer();
        while (sd_load_acquire_sys(slot) < epoch) {
            if (*(volatile int32_t *)&s.status->failed) {
                ok = 0;
                break;
            }
            if (sd_globaltimer() - start > s.timeout_ns) {
                sd_give_up(s, phase, j, epoch);
                ok = 0;
                break;
            }
            __nanosleep(64);
        }
    }
    if (ok) __threadfence_system();
    return __syncthreads_and(ok) != 0;
}

#endif /* SD_FLAGS_CUH */
