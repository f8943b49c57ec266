/*
 * sd_internal.h: what the library's .cu files share and the ABI does not show:
 * the process's runtime state, the error helpers and the layout of the
 * symmetric sync area. Included by every .cu file of the comm library.
 */
#ifndef SD_INTERNAL_H
#define SD_INTERNAL_H

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stddef.h>
#include <stdint.h>

#include "symddp_cuda.h"

/* Most blocks a collective kernel runs; the flag area has a slot row per block. */
#define SD_MAX_BLOCKS 512
/* Flag phases: entry, middle and exit barrier of a collective kernel. */
#define SD_PHASES 3
/* Parities of the call slots: a block's slot is rewritten two of its epochs later. */
#define SD_CALL_PARITIES 2
/* Words per PE in the control area (sd_allgather_u64). */
#define SD_CTRL_WORDS 8
/* Staging area for transfers to peers that pointers cannot reach. */
#define SD_STAGING_BYTES ((size_t)8 << 20)
/* Threads per block of the collective kernels. */
#define SD_THREADS 512
/* The symmetric heap room the library takes for itself beyond the user's. */
#define SD_RESERVED_HEAP_BYTES ((int64_t)64 << 20)

/*
 * What an in-kernel wait that gave up leaves behind (device memory): a peer
 * that did not arrive by the deadline, or (desync = 1) peers that arrived
 * in another collective (the calls are in the block's row of call slots).
 */
struct sd_dev_status {
    int32_t failed;  /* 0, or 1 once any wait of any kernel gave up */
    int32_t phase;   /* the phase of the first wait that gave up */
    int32_t block;   /* its block */
    int32_t peer;    /* the first peer it did not see, or whose call differed */
    uint64_t epoch;  /* the epoch it waited for */
    int32_t op;      /* SD_OP_* of the kernel */
    int32_t desync;  /* 1: the peers' calls differed (not a timeout) */
    int32_t recorded; /* 1 once the fields above are written (failed is set first) */
    int32_t pad;
};

/* Operation names recorded in sd_dev_status.op. */
enum {
    SD_OP_BARRIER = 1,
    SD_OP_ALLREDUCE = 2,
    SD_OP_REDUCE = 3,
    SD_OP_BROADCAST = 4,
    SD_OP_REDUCE_SCATTER = 5,
    SD_OP_ALLGATHER = 6,
    SD_OP_ARRIVAL = 7 /* the arrival barrier before a collective on the collectives stream */
};

/*
 * The arguments every flag-synchronised kernel gets (by value, so a CUDA
 * graph keeps the call it was captured with).
 *   flags layout on every PE: uint64 [SD_PHASES][SD_MAX_BLOCKS][npes];
 *   slot [p][b][j] holds the last epoch PE j's block b announced at phase p.
 *   call slots, calls_off words after the flags on every PE:
 *   uint64 [SD_CALL_PARITIES][SD_MAX_BLOCKS][npes][SD_CALL_WORDS]; slot
 *   [e % 2][b][j] holds the call of PE j's block b at its epoch e (phase 0).
 */
struct sd_sync {
    uint64_t *const *peer_flags; /* [npes] each PE's flag area, as this PE sees it */
    uint64_t *my_flags;          /* this PE's flag area */
    uint64_t *epochs;            /* [SD_MAX_BLOCKS] this PE's epoch per block index */
    sd_dev_status *status;
    volatile int32_t *host_failed; /* mapped host word, set with status->failed */
    int32_t me, npes;
    uint64_t timeout_ns;
    int32_t op;    /* SD_OP_* */
    int32_t check; /* 1: compare call with the peers' at phase 0 (sd_set_call) */
    uint64_t calls_off;           /* words from a flag area to its call slots */
    uint64_t call[SD_CALL_WORDS]; /* this PE's fingerprint of the collective */
};

/* A symmetric allocation. */
struct sd_buf {
    void *base;        /* local copy */
    size_t bytes;
    void **d_peers;    /* device array [npes]: nvshmem_ptr(base, j), NULL if unreachable */
    void **h_peers;    /* the same on the host */
    int reachable;     /* every peer non-NULL */
};

/* The process's runtime. */
struct sd_state {
    int initialised;
    int finalised;
    int failed; /* an in-kernel wait gave up: peers are out of step */
    int pe, npes;
    int device, device_count, sm_count, max_blocks;
    int all_reachable;
    int force_nvshmem; /* SYMDDP_FORCE_NVSHMEM: treat every peer as out of pointer reach */
    int used_rma; /* NVSHMEM puts were issued since the last quiet */
    cudaStream_t stream;
    cudaStream_t side; /* reads that must not queue behind the main stream */
    /* The collectives stream (sd_comm_fork, sd_overlap.cu): while forked,
     * every collective goes there, behind an arrival barrier. */
    cudaStream_t comm;
    cudaEvent_t fork_event, join_event;
    int forked;
    uint64_t *d_trace; /* [SD_TRACE_SLOTS] sd_trace_stamp's clock readings */
    uint64_t timeout_ns;
    size_t one_shot_max;

    unsigned char *area;   /* symmetric: flags | call slots | ctrl | staging */
    size_t area_bytes;
    uint64_t *flags;       /* == area */
    uint64_t *calls;       /* the call slots (sd_sync) */
    int check;             /* the desync check is on (sd_set_call) */
    uint64_t call[SD_CALL_WORDS]; /* the fingerprint the next flag kernels carry */
    uint64_t *ctrl;        /* [npes][SD_CTRL_WORDS] */
    void *staging;         /* SD_STAGING_BYTES */
    uint64_t **h_peer_area; /* [npes] nvshmem_ptr(area, j) */
    uint64_t **d_peer_flags; /* device copy of h_peer_area */
    uint64_t *d_epochs;
    sd_dev_status *d_status;
    int32_t *h_failed;     /* mapped pinned host word the kernels set on a timeout */
    int32_t *h_failed_dev; /* its device address */
    uint64_t *h_gather_in;  /* pinned [SD_CTRL_WORDS]: this PE's allgather record */
    uint64_t *h_gather_out; /* pinned [npes][SD_CTRL_WORDS]: everybody's */
    int gather_pending;
    char timeout_op[32]; /* the host-side wait that gave up, when no kernel said */
};

extern sd_state g_sd;

/* ---- errors (sd_errors.cu) ---- */

/* Records a formatted message with file:line; returns code. */
int sd_fail(int code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Records a failed CUDA call; returns SD_ERR_NO_DEVICE for driver/device errors. */
int sd_fail_cuda(const char *file, int line, const char *call, cudaError_t err);

#define SD_FAIL(code, ...) sd_fail((code), __FILE__, __LINE__, __VA_ARGS__)

/* Returns from the enclosing function with a recorded error when a CUDA call fails. */
#define SD_CUDA(call)                                                  \
    do {                                                               \
        cudaError_t sd_e_ = (call);                                    \
        if (sd_e_ != cudaSuccess)                                      \
            return sd_fail_cuda(__FILE__, __LINE__, #call, sd_e_);     \
    } while (0)

/* Returns the status of a library call when it is not SD_OK. */
#define SD_TRY(call)                    \
    do {                                \
        int sd_rc_ = (call);            \
        if (sd_rc_ != SD_OK) return sd_rc_; \
    } while (0)

/* Makes device current on the calling thread when it is not. The CUDA
 * runtime's current device belongs to the thread, and Go runs a PE's calls
 * on whichever thread: with one GPU per PE on a multi-GPU host, a thread
 * still on GPU 0 makes PE 1's copies fail (cudaMemcpyAsync on GPU 1's
 * stream: invalid argument). */
static inline int sd_use_device(int device) {
    int cur = -1;
    SD_CUDA(cudaGetDevice(&cur));
    if (cur != device) SD_CUDA(cudaSetDevice(device));
    return SD_OK;
}

/* Fails with SD_ERR_STATE unless the runtime is up. */
int sd_require_init(const char *what);

/* The flag-sync arguments of this PE for a kernel of operation op. */
sd_sync sd_sync_args(int op);

/* Offset of slot [phase][block][pe] in a flag area. */
static inline __host__ __device__ size_t sd_flag_index(int phase, int block, int pe, int npes) {
    return ((size_t)phase * SD_MAX_BLOCKS + (size_t)block) * (size_t)npes + (size_t)pe;
}

/* Offset (words) of the call slot of PE pe's block at epoch in the call slots. */
static inline __host__ __device__ size_t sd_call_index(uint64_t epoch, int block, int pe, int npes) {
    return (((size_t)(epoch % SD_CALL_PARITIES) * SD_MAX_BLOCKS + (size_t)block) * (size_t)npes +
            (size_t)pe) *
           SD_CALL_WORDS;
}

/* Launches the one-block flag barrier (sd_barrier.cu). */
int sd_launch_barrier(cudaStream_t stream);

/*
 * The stream a collective enqueued now goes on: the collectives stream
 * between sd_comm_fork and sd_comm_join, else the main one (sd_overlap.cu).
 */
static inline cudaStream_t sd_coll_stream(void) { return g_sd.forked ? g_sd.comm : g_sd.stream; }
/*
 * What every collective (but a barrier) enqueues first: while forked, the
 * one-block arrival barrier on the collectives stream (sd_overlap.cu);
 * nothing otherwise.
 */
int sd_coll_arrival(void);
/* sd_require_init, and SD_ERR_STATE while forked: for the blocking entry
 * points that launch flag kernels on the main stream. */
int sd_require_joined(const char *what);
/* The collectives stream, its events and the trace array: made by sd_init,
 * released by sd_finalize (sd_overlap.cu). */
int sd_overlap_setup(void);
void sd_overlap_release(void);
/* NVSHMEM's own barrier of every PE, enqueued on stream (the paths for peers out of pointer reach). */
int sd_nvshmem_barrier(cudaStream_t stream);

#endif /* SD_INTERNAL_H */
