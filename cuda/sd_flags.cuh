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
 * 0 when a wait of this PE has already given up (a timeout or a desync):
 * the kernel then stops at its first barrier without announcing itself, so
 * that a kernel queued behind the failed one (in a graph, or enqueued before
 * the host saw the failure) cannot meet a peer's kernel of the same epoch
 * and move data. Call from every thread of the block.
 */
static __device__ __forceinline__ uint64_t sd_block_epoch(const sd_sync &s) {
    __shared__ uint64_t epoch;
    if (threadIdx.x == 0) {
        const uint64_t prev = s.epochs[blockIdx.x];
        const int32_t failed = *(volatile int32_t *)&s.status->failed;
        epoch = failed ? 0 : prev + 1;
        if (!failed) s.epochs[blockIdx.x] = epoch;
    }
    __syncthreads();
    return epoch;
}

/*
 * Records the first wait that gave up (desync = 0: peer did not arrive by the
 * deadline; 1: peer arrived in another collective) and tells the host
 * through the mapped word.
 */
static __device__ __noinline__ void sd_record_give_up(sd_dev_status *status, volatile int32_t *host_failed,
                                                      int op, int phase, int peer, uint64_t epoch,
                                                      int desync) {
    if (atomicCAS(&status->failed, 0, 1) == 0) {
        status->phase = phase;
        status->block = (int32_t)blockIdx.x;
        status->peer = peer;
        status->epoch = epoch;
        status->op = op;
        status->desync = desync;
        __threadfence_system();
        *(volatile int32_t *)&status->recorded = 1;
        __threadfence_system();
    }
    *host_failed = 1;
    __threadfence_system();
}

/* sd_record_give_up for the kernel of s. (The record takes s's fields by
 * value: a reference to s in a call that is not inlined would copy the
 * whole argument block to local memory in every thread of every kernel.) */
static __device__ __forceinline__ void sd_give_up(const sd_sync &s, int phase, int peer, uint64_t epoch,
                                                  int desync) {
    sd_record_give_up(s.status, s.host_failed, s.op, phase, peer, epoch, desync);
}

/* Whether the call in slot (written by a peer, read after its flag) is this
 * kernel's, all words but the first (the number, which a replayed graph
 * keeps from its capture). The loads are independent (no short-circuit), so
 * they cost one trip to memory. */
static __device__ __forceinline__ bool sd_same_call(const sd_sync &s, const uint64_t *slot) {
    uint64_t diff = 0;
#pragma unroll
    for (int w = 1; w < SD_CALL_WORDS; w++)
        diff |= (uint64_t)__ldcg((const unsigned long long *)slot + w) ^ s.call[w];
    return diff == 0;
}

/*
 * Barrier of block blockIdx.x across all PEs at phase. Every thread calls it.
 *   1. __syncthreads: the block's writes before the barrier are done;
 *   2. threads j < npes (strided): at phase 0 with the desync check on,
 *      store this PE's call into call slot [epoch % 2][block][me] of PE j;
 *      then fence, and release-store epoch into slot [phase][block][me] of
 *      PE j's flag area;
 *   3. the same threads spin with acquire loads until this PE's slot
 *      [phase][block][j] reaches epoch, or the deadline passes, or another
 *      wait already gave up; at phase 0 with the check on, each then
 *      compares PE j's call (published before that flag) with its own;
 *   4. __syncthreads_and: the block continues only if all peers arrived;
 *      and, at phase 0 with the check on, only if no peer's call differed:
 *      otherwise a thread that saw one records the desync (after every peer's
 *      call of this block has arrived, so that the host reads the whole row)
 *      and the block stops before touching any data.
 * Returns false when the block must stop (a wait gave up, or a desync).
 * Every block compares on its own: blocks never wait for other blocks of
 * their grid, and a block of a PE whose grid is smaller (another collective)
 * is not waited for: this PE's block 0, which every kernel has, finds the
 * desync and the blocks still waiting see it and stop.
 */
static __device__ __forceinline__ bool sd_block_barrier(const sd_sync &s, int phase, uint64_t epoch) {
    __syncthreads();
    if (epoch == 0) return false; /* this PE had failed before the kernel started */
    const int b = (int)blockIdx.x;
    const bool check = phase == 0 && s.check;
    for (int j = (int)threadIdx.x; j < s.npes; j += (int)blockDim.x) {
        uint64_t *const area = s.peer_flags[j]; /* loaded before the fence, not after it */
        if (check) {
            uint64_t *slot = area + s.calls_off + sd_call_index(epoch, b, s.me, s.npes);
#pragma unroll
            for (int w = 0; w < SD_CALL_WORDS; w++) slot[w] = s.call[w];
        }
        __threadfence_system();
        sd_store_release_sys(area + sd_flag_index(phase, b, s.me, s.npes), epoch);
    }
    int ok = 1, differs = -1;
    for (int j = (int)threadIdx.x; ok && j < s.npes; j += (int)blockDim.x) {
        const uint64_t *slot = s.my_flags + sd_flag_index(phase, b, j, s.npes);
        if (sd_load_acquire_sys(slot) < epoch) {
            const uint64_t start = sd_globaltimer();
            while (sd_load_acquire_sys(slot) < epoch) {
                if (*(volatile int32_t *)&s.status->failed) {
                    ok = 0;
                    break;
                }
                if (sd_globaltimer() - start > s.timeout_ns) {
                    sd_give_up(s, phase, j, epoch, 0);
                    ok = 0;
                    break;
                }
                __nanosleep(64);
            }
        }
        if (ok && check && differs < 0 &&
            !sd_same_call(s, s.my_flags + s.calls_off + sd_call_index(epoch, b, j, s.npes)))
            differs = j;
    }
    if (ok) __threadfence_system();
    if (!__syncthreads_and(ok)) return false;
    if (!check) return true;
    if (__syncthreads_or(differs >= 0)) {
        if (differs >= 0) sd_give_up(s, phase, differs, epoch, 1);
        return false;
    }
    return true;
}

#endif /* SD_FLAGS_CUH */
