/*
 * sd_barrier.cu: the barrier of all PEs: one block, flags in symmetric memory,
 * no host round trip, so it can sit between kernels on a stream or in a CUDA
 * graph. When some peer cannot be reached by pointer (another node), NVSHMEM's
 * nvshmemx_barrier_all_on_stream is used instead. The same kernel is the
 * arrival barrier before each collective on the collectives stream
 * (sd_coll_arrival; sd_overlap.cu).
 */
#include "sd_flags.cuh"

/* Threads of the barrier kernel: one warp, striding over the PEs. */
#define SD_BARRIER_THREADS 32

__global__ void sd_barrier_kernel(sd_sync s) {
    const uint64_t epoch = sd_block_epoch(s);
    (void)sd_block_barrier(s, 0, epoch);
}

int sd_nvshmem_barrier(cudaStream_t stream) {
    nvshmemx_barrier_all_on_stream(stream);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/* The flag barrier kernel on stream, reported as op (SD_OP_*) when it gives up. */
static int sd_launch_flag_barrier(cudaStream_t stream, int op) {
    sd_barrier_kernel<<<1, SD_BARRIER_THREADS, 0, stream>>>(sd_sync_args(op));
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

int sd_launch_barrier(cudaStream_t stream) {
    if (!g_sd.all_reachable) return sd_nvshmem_barrier(stream);
    return sd_launch_flag_barrier(stream, SD_OP_BARRIER);
}

/* The arrival barrier of a collective on the collectives stream: the same
 * one-block kernel (sd_comm_fork needs every peer in pointer reach). */
int sd_coll_arrival(void) {
    if (!g_sd.forked) return SD_OK;
    return sd_launch_flag_barrier(g_sd.comm, SD_OP_ARRIVAL);
}

extern "C" int sd_barrier_enqueue(void) {
    SD_TRY(sd_require_init("sd_barrier_enqueue"));
    return sd_launch_barrier(sd_coll_stream());
}
