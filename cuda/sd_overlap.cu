/*
 * sd_overlap.cu: the collectives stream, on which gradient reductions run
 * beside the backward pass (sd_comm_fork, sd_comm_join), and a trace of it
 * (sd_trace_stamp, sd_trace_read).
 *
 * A training step that overlaps its reductions with backward (ddp's device
 * step path with a bucket size) enqueues, on the main stream, the backward of
 * the last layers, then sd_comm_fork and the reduction of their gradient
 * bucket, then the backward of the next layers, sd_comm_fork and the next
 * bucket's reduction, ..., and sd_comm_join before the optimizer. Each fork
 * records an event on the main stream that the collectives stream waits for,
 * so a bucket's reduction starts after the backward that wrote it and runs
 * while the main stream goes on with the layers before it; the join makes the
 * main stream wait for every reduction.
 *
 * An earlier version of this (a second stream, fork, per-bucket events, join)
 * hung on an H100 with 8 PEs sharing the GPU under MPS in the first step of
 * gpt-tiny with 1 MiB buckets. The rules below rule out each way a
 * flag-synchronised kernel (sd_flags.cuh) can wait forever here that we know
 * of; gpt-tiny in bf16 at 8 PEs under MPS still hung with them (H100 and
 * H200, 2026-12-06: docs/GPU.md lists the runs): cuBLASLt's bf16 GEMMs of
 * several-block thread-block clusters break an assumption of (a), that a
 * PE's compute kernels can always start beside parked barrier warps. A
 * cluster's blocks must be placed together, and under MPS's share of SMs
 * they found no room; with one-block clusters (sdc_one_block_clusters,
 * sd_lt.cuh, which the engine takes when ddp tells it that PEs share its GPU
 * and reduce buckets during backward) the runs passed (2026-12-07):
 *
 * (a) SM starvation. A collective's grid (up to max_blocks blocks of
 *     SD_THREADS threads) spins at its entry barrier until the same block of
 *     every PE arrives. Launched straight after a PE's bucket, those blocks
 *     would sit on the shared GPU while a slower PE still runs the backward
 *     GEMMs that lead to the same bucket, and could take the SMs that PE
 *     needs. So every collective enqueued while forked is preceded by the
 *     one-block arrival barrier (sd_coll_arrival: the 32-thread barrier
 *     kernel of sd_barrier.cu), on the collectives stream: a PE that is early
 *     parks one warp, not a grid, and the collective's grid is launched only
 *     once every PE's collectives stream has reached the same point, that is
 *     once every PE has finished that bucket's backward. The grid's blocks
 *     then wait only for peers whose next work on that stream is the same
 *     launch, never for a peer's compute: at worst for peer blocks queued
 *     behind the GEMM blocks of that peer's main stream, which depend on
 *     nothing and retire. The collectives stream has the device's highest
 *     priority, so that its blocks are scheduled before the main stream's
 *     pending ones (a preference, not something the argument above needs).
 * (b) Two streams of one PE running flag kernels at once. The kernels of a
 *     PE share the per-block epochs (g_sd.d_epochs) and flag slots, so two of
 *     them in flight at once would take epochs out of order and never meet
 *     their peers. While forked every collective goes on the collectives
 *     stream (sd_coll_stream), the control words' allreduce included, and the
 *     blocking entry points that launch flag kernels on the main stream fail
 *     (sd_require_joined); the first fork orders the collectives stream after
 *     everything on the main stream, the previous step's parameter
 *     all-gather among it, and the join orders the main stream after the
 *     collectives stream. At any moment one stream of a PE issues flag
 *     kernels, in the order they were enqueued.
 * (c) Grids that differ across PEs. The epochs are per block index, so block
 *     b of every PE must take part in the same collectives: every launcher
 *     sizes its grid from arguments that are the same on every PE (the range
 *     of an allreduce; the largest shard, span, of a reduce-scatter of part of
 *     an arena, which every PE works out from every PE's piece), never from
 *     this PE's own piece; the arrival barrier is one block everywhere.
 * (d) CUDA graph capture. The fork's event is recorded on the capturing main
 *     stream, so the collectives stream joins the capture at the first fork;
 *     sd_comm_join records the join event on it and the main stream waits for
 *     that before the capture ends, so the graph holds both streams' work
 *     with these dependencies. Eagerly the same calls order the same work, so
 *     the first (eager) step and the replayed ones run alike.
 */
#include <stdint.h>

#include "sd_internal.h"

/* Creates the collectives stream, its events and the trace array (sd_init). */
int sd_overlap_setup(void) {
    int least = 0, greatest = 0;
    SD_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    SD_CUDA(cudaStreamCreateWithPriority(&g_sd.comm, cudaStreamNonBlocking, greatest));
    SD_CUDA(cudaEventCreateWithFlags(&g_sd.fork_event, cudaEventDisableTiming));
    SD_CUDA(cudaEventCreateWithFlags(&g_sd.join_event, cudaEventDisableTiming));
    SD_CUDA(cudaMalloc((void **)&g_sd.d_trace, SD_TRACE_SLOTS * sizeof(uint64_t)));
    SD_CUDA(cudaMemset(g_sd.d_trace, 0, SD_TRACE_SLOTS * sizeof(uint64_t)));
    g_sd.forked = 0;
    return SD_OK;
}

/* Releases what sd_overlap_setup made (sd_finalize; the streams are idle). */
void sd_overlap_release(void) {
    if (g_sd.d_trace) cudaFree(g_sd.d_trace);
    if (g_sd.join_event) cudaEventDestroy(g_sd.join_event);
    if (g_sd.fork_event) cudaEventDestroy(g_sd.fork_event);
    if (g_sd.comm) cudaStreamDestroy(g_sd.comm);
    g_sd.d_trace = NULL;
    g_sd.join_event = g_sd.fork_event = NULL;
    g_sd.comm = NULL;
    g_sd.forked = 0;
}

int sd_require_joined(const char *what) {
    SD_TRY(sd_require_init(what));
    if (g_sd.forked)
        return SD_FAIL(SD_ERR_STATE,
                       "%s: the collectives stream is forked (sd_comm_fork): join it first "
                       "(sd_comm_join)",
                       what);
    return SD_OK;
}

extern "C" int sd_comm_fork(void) {
    SD_TRY(sd_require_init("sd_comm_fork"));
    if (!g_sd.all_reachable)
        return SD_FAIL(SD_ERR_ARG,
                       "sd_comm_fork: the collectives stream needs every peer reachable by pointer "
                       "(some peer is on another node, or SYMDDP_FORCE_NVSHMEM is set)");
    SD_CUDA(cudaEventRecord(g_sd.fork_event, g_sd.stream));
    SD_CUDA(cudaStreamWaitEvent(g_sd.comm, g_sd.fork_event, 0));
    g_sd.forked = 1;
    return SD_OK;
}

extern "C" int sd_comm_join(void) {
    /* Not sd_require_init: after a failure the join still has to close a
     * capture in progress (the collectives refuse to enqueue anyway). */
    if (!g_sd.initialised) return SD_FAIL(SD_ERR_STATE, "sd_comm_join: the runtime is not initialised");
    if (!g_sd.forked) return SD_FAIL(SD_ERR_STATE, "sd_comm_join: the collectives stream is not forked");
    SD_TRY(sd_use_device(g_sd.device));
    g_sd.forked = 0;
    SD_CUDA(cudaEventRecord(g_sd.join_event, g_sd.comm));
    SD_CUDA(cudaStreamWaitEvent(g_sd.stream, g_sd.join_event, 0));
    return SD_OK;
}

/* One thread writes the GPU's global nanosecond clock into *slot. */
__global__ void sd_trace_kernel(uint64_t *slot) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    *slot = t;
}

extern "C" int sd_trace_stamp(int32_t on_comm, int32_t slot) {
    SD_TRY(sd_require_init("sd_trace_stamp"));
    if (slot < 0 || slot >= SD_TRACE_SLOTS)
        return SD_FAIL(SD_ERR_ARG, "sd_trace_stamp: slot %d of %d", slot, SD_TRACE_SLOTS);
    if (on_comm && !g_sd.forked)
        return SD_FAIL(SD_ERR_STATE, "sd_trace_stamp: the collectives stream is not forked");
    sd_trace_kernel<<<1, 1, 0, on_comm ? g_sd.comm : g_sd.stream>>>(g_sd.d_trace + slot);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sd_trace_read(uint64_t *out, int32_t n) {
    SD_TRY(sd_require_init("sd_trace_read"));
    if (n < 0 || n > SD_TRACE_SLOTS || (n > 0 && !out))
        return SD_FAIL(SD_ERR_ARG, "sd_trace_read: %d slots of %d", n, SD_TRACE_SLOTS);
    if (n == 0) return SD_OK;
    SD_CUDA(cudaMemcpyAsync(out, g_sd.d_trace, (size_t)n * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                            g_sd.side));
    SD_CUDA(cudaStreamSynchronize(g_sd.side));
    return SD_OK;
}
