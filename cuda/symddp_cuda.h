/*
 * symddp_cuda.h: the C ABI of libsymddp_cuda.so, the project's GPU library.
 *
 * The library is built on a GPU host by cuda/build.sh (nvcc, NVSHMEM, cuBLAS)
 * and loaded at run time with dlopen() by internal/cudalib. This header uses
 * plain C types only (stdint, size_t), so cgo can include it without CUDA.
 *
 * Conventions
 *   - Every entry point returns an int status: SD_OK (0) or one of the SD_ERR_*
 *     codes. On failure it stores a message (with file:line and the failing
 *     call) that sd_last_error() returns on the same thread until the next
 *     failure on that thread.
 *   - One process is one PE. The library keeps one runtime per process:
 *     sd_init once, sd_finalize once.
 *   - Sizes and offsets are in bytes unless the name says elements.
 *   - "Enqueue" functions put work on the library's CUDA stream (sd_stream) and
 *     return at once; sd_stream_wait or an event waits for it with a deadline.
 *     Everything else returns when its work is complete. Between sd_comm_fork
 *     and sd_comm_join the enqueued collectives go on the collectives stream
 *     instead (below).
 *   - Collectives (sd_alloc, sd_free, sd_barrier_enqueue, sd_allreduce_enqueue,
 *     sd_reduce_enqueue, sd_broadcast_enqueue, sd_reduce_scatter_enqueue,
 *     sd_allgather_enqueue, sd_allgather_u64, sd_finalize with collective = 1)
 *     must be called by every PE in the same order.
 */
#ifndef SYMDDP_CUDA_H
#define SYMDDP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SD_ABI_VERSION changes whenever a signature or a struct below changes. */
#define SD_ABI_VERSION 4

/* Status codes. */
enum {
    SD_OK = 0,
    SD_ERR = 1,           /* a CUDA, NVSHMEM or cuBLAS call failed */
    SD_ERR_NO_DEVICE = 2, /* no usable GPU or driver */
    SD_ERR_TIMEOUT = 3,   /* a wait passed its deadline (see sd_timeout_info) */
    SD_ERR_NO_MEMORY = 4, /* symmetric heap or device memory exhausted */
    SD_ERR_ARG = 5,       /* bad argument */
    SD_ERR_STATE = 6,     /* not initialised, initialised twice, or failed before */
    SD_ERR_DESYNC = 7     /* PEs met in different collectives (see sd_set_call, sd_desync_info) */
};

/* Words of a collective's fingerprint (sd_set_call): desync.Words of
 * comm/internal/desync, which encodes them. */
#define SD_CALL_WORDS 5

/* Element types (the numbers match comm.Kind). */
enum { SD_F32 = 1, SD_BF16 = 2 };

/* Reduction operators (the numbers match comm.Op). */
enum { SD_SUM = 1, SD_MEAN = 2, SD_MAX = 3, SD_MIN = 4 };

/* Allreduce algorithms. */
enum {
    SD_ALGO_AUTO = 0,     /* one-shot up to the one-shot limit, two-shot above */
    SD_ALGO_ONE_SHOT = 1, /* every PE reduces the whole range from all peers */
    SD_ALGO_TWO_SHOT = 2, /* reduce-scatter into owner slices, then all-gather */
    SD_ALGO_NVSHMEM = 3   /* NVSHMEM's on-stream team reduction (the fallback) */
};

/* Bootstrap of sd_init. */
enum {
    SD_BOOT_UNIQUEID = 1, /* PE 0's unique id handed to the others out of band */
    SD_BOOT_MPI = 2,      /* NVSHMEM_BOOTSTRAP=MPI (under mpirun) */
    SD_BOOT_PMIX = 3      /* NVSHMEM_BOOTSTRAP=PMI with PMIx */
};

/* Signal operations of sd_put_signal (as NVSHMEM_SIGNAL_SET / _ADD). */
enum { SD_SIGNAL_SET = 1, SD_SIGNAL_ADD = 2 };

typedef struct {
    int32_t bootstrap;   /* SD_BOOT_* */
    int32_t pe;          /* this PE (unique-id bootstrap only) */
    int32_t npes;        /* number of PEs (unique-id bootstrap only) */
    int32_t local_pe;    /* PE number on this host; picks the GPU */
    int32_t device;      /* GPU to use, or -1 for local_pe % device count */
    int32_t single_node; /* 1: NVSHMEM_REMOTE_TRANSPORT=none unless set */
    int64_t heap_bytes;  /* > 0: NVSHMEM_SYMMETRIC_SIZE (plus the library's own area) */
    int64_t timeout_ns;  /* deadline of every in-kernel wait; <= 0: 5 minutes */
    const void *uid;     /* unique id from sd_get_uniqueid (unique-id bootstrap) */
    size_t uid_len;      /* its length, sd_uniqueid_size() */
} sd_init_args;

typedef struct {
    int32_t pe;            /* nvshmem_my_pe() */
    int32_t npes;          /* nvshmem_n_pes() */
    int32_t device;        /* the CUDA device this PE uses */
    int32_t device_count;  /* CUDA devices visible to this process */
    int32_t sm_count;      /* multiprocessors of the device */
    int32_t max_blocks;    /* blocks per collective kernel, agreed by all PEs */
    int32_t all_reachable; /* 1: every PE reaches every peer by pointer (agreed) */
    int32_t nvshmem_major; /* NVSHMEM library version */
    int32_t nvshmem_minor;
    int32_t nvshmem_patch;
    int32_t cuda_runtime; /* cudaRuntimeGetVersion */
    int32_t cuda_driver;  /* cudaDriverGetVersion */
    char device_name[128];
} sd_info;

/* A symmetric allocation (opaque). */
typedef struct sd_buf sd_buf;

/* ---- errors and versions ---- */

/* The last failure's message on this thread ("" if none). Never NULL. */
const char *sd_last_error(void);
/* SD_ABI_VERSION of the built library. */
int sd_abi_version(void);
/* Number of CUDA devices; SD_ERR_NO_DEVICE when there is no GPU or driver. */
int sd_device_count(int32_t *count);

/* ---- runtime ---- */

/* Size in bytes of an NVSHMEM unique id. */
int sd_uniqueid_size(size_t *size);
/* PE 0 of a unique-id bootstrap: writes a fresh unique id into out[cap]. */
int sd_get_uniqueid(void *out, size_t cap);
/* Selects the GPU, starts NVSHMEM and the library's symmetric sync area. */
int sd_init(const sd_init_args *args, sd_info *info);
/*
 * Ends the runtime. collective = 1: a barrier (with the deadline) and
 * nvshmem_finalize, as every PE does the same; collective = 0 (a peer failed):
 * frees local resources only and never waits for peers.
 */
int sd_finalize(int32_t collective);
/* The library's CUDA stream (a cudaStream_t) for stream-ordered work. */
int sd_stream(uint64_t *stream);
/* Deadline of in-kernel waits from now on (ns). */
int sd_set_timeout(int64_t timeout_ns);
/* Largest buffer (bytes) that SD_ALGO_AUTO reduces one-shot. */
int sd_set_one_shot_max(size_t bytes);

/* ---- symmetric memory ---- */

/* Collective nvshmem_malloc of bytes, zeroed, followed by a barrier. */
int sd_alloc(size_t bytes, sd_buf **out);
/* Collective nvshmem_free. */
int sd_free(sd_buf *b);
/* Local device address of b. */
int sd_buf_ptr(const sd_buf *b, uint64_t *ptr);
/* nvshmem_ptr(b, pe): the peer's copy in this address space, 0 if unreachable. */
int sd_peer_ptr(const sd_buf *b, int32_t pe, uint64_t *ptr);

/* ---- one-sided transfers from host memory (complete on return) ---- */

/* Copies host src[bytes] into PE pe's copy of b at off. */
int sd_put(sd_buf *b, size_t off, const void *src, size_t bytes, int32_t pe);
/* Copies PE pe's copy of b at off into host dst[bytes]. */
int sd_get(void *dst, const sd_buf *b, size_t off, size_t bytes, int32_t pe);
/*
 * Copies host src into PE pe's copy of b at off, then (ordered after the data)
 * updates the uint64 at sig_off of sig on pe with op (SD_SIGNAL_*) and value.
 */
int sd_put_signal(sd_buf *b, size_t off, const void *src, size_t bytes, sd_buf *sig,
                  size_t sig_off, uint64_t value, int32_t op, int32_t pe);
/* Reads this PE's uint64 at off of b (on a side stream, never blocked by the main one). */
int sd_read_u64(const sd_buf *b, size_t off, uint64_t *value);
/* Completes this PE's outstanding NVSHMEM puts (nvshmem_quiet on the stream). */
int sd_quiet(void);

/* ---- collectives (enqueued on sd_stream) ---- */

/* A barrier of all PEs: flags in symmetric memory, one block, no host round trip. */
int sd_barrier_enqueue(void);
/* In-place allreduce of n elements of dtype at element off of b; algo SD_ALGO_*. */
int sd_allreduce_enqueue(sd_buf *b, size_t off, size_t n, int32_t dtype, int32_t op,
                         int32_t algo);
/* Reduce into root's copy; the other PEs' copies are unchanged. */
int sd_reduce_enqueue(sd_buf *b, size_t off, size_t n, int32_t dtype, int32_t op,
                      int32_t root);
/* Copies root's bytes [off, off+bytes) of b to every PE (any element kind). */
int sd_broadcast_enqueue(sd_buf *b, size_t off, size_t bytes, int32_t root);
/*
 * The two halves of an allreduce, for work on one shard of a buffer between
 * them (a sharded optimizer update). Every PE passes its own shard [lo, hi),
 * the shards of all PEs disjoint, and span, the length of the largest shard:
 * the same on every PE (the kernels' grid depends on it alone). An empty
 * shard still takes part; span 0 (every shard empty) does nothing. Both need
 * every peer in pointer reach (sd_info.all_reachable): SD_ERR_ARG otherwise.
 *
 * sd_reduce_scatter_enqueue reduces elements [lo, hi) of dtype across all
 * PEs into this PE's copy only, with the bits sd_allreduce_enqueue gives
 * those elements; the rest of every copy is unchanged.
 */
int sd_reduce_scatter_enqueue(sd_buf *b, size_t lo, size_t hi, size_t span, int32_t dtype,
                              int32_t op);
/* Copies this PE's bytes [lo, hi) of b into every other PE's copy (span in bytes too). */
int sd_allgather_enqueue(sd_buf *b, size_t lo, size_t hi, size_t span);

/* ---- the collectives stream: reductions overlapped with compute ---- */

/*
 * sd_comm_fork orders the library's second stream, the collectives stream
 * (created with the device's highest priority), after everything enqueued on
 * sd_stream so far (an event), and from then until sd_comm_join every
 * collective enqueued (allreduce, reduce, broadcast, reduce-scatter,
 * all-gather, barrier) goes on the collectives stream, so that compute
 * enqueued on sd_stream meanwhile runs beside it. Called again before
 * sd_comm_join it orders the collectives stream after sd_stream's work so far
 * once more (a gradient bucket that backward has just finished). While
 * forked:
 *   - every collective but a barrier is preceded, on the collectives stream,
 *     by a one-block arrival barrier of all PEs, so that its full grid starts
 *     only when every PE has reached it: the wide grids never spin on a
 *     shared GPU waiting for a peer that still needs SMs to get there;
 *   - sd_stream issues no collective (all of them go on the collectives
 *     stream), so the two streams never run flag-synchronised kernels at once
 *     (they share the per-block epochs and flag slots);
 *   - the blocking entry points that launch flag kernels on sd_stream
 *     (sd_alloc, sd_free, sd_allgather_u64*, the timings) fail with
 *     SD_ERR_STATE; sd_stream_wait and sd_stream_query cover both streams.
 * sd_comm_join makes sd_stream wait for everything enqueued on the
 * collectives stream (an event) and sends collectives to sd_stream again;
 * SD_ERR_STATE when not forked. Both may be called while sd_stream is being
 * captured into a CUDA graph: the collectives stream joins the capture at the
 * fork and is joined back by sd_comm_join, which must come before the capture
 * ends. Forking needs every peer in pointer reach (sd_info.all_reachable):
 * SD_ERR_ARG otherwise.
 */
int sd_comm_fork(void);
int sd_comm_join(void);

/* Slots of the trace (sd_trace_stamp). */
#define SD_TRACE_SLOTS 4096

/*
 * A debugging trace of the overlap: enqueues one thread that writes the
 * GPU's nanosecond clock (%globaltimer, one clock for every PE of a GPU) into
 * slot (< SD_TRACE_SLOTS) of the library's trace array, on sd_stream
 * (on_comm = 0) or on the collectives stream (on_comm = 1, only while
 * forked). It can be captured into a CUDA graph. sd_trace_read copies slots
 * [0, n) to the host (after the work that wrote them is done: wait first).
 */
int sd_trace_stamp(int32_t on_comm, int32_t slot);
int sd_trace_read(uint64_t *out, int32_t n);

/*
 * Collective, blocking: every PE contributes count (<= 8) uint64 words; all
 * receives npes * count words, PE by PE.
 */
int sd_allgather_u64(const uint64_t *mine, int32_t count, uint64_t *all);
/* sd_allgather_u64 in two steps: enqueue (mine is copied at once), wait for
 * the stream, then collect the result. One allgather at a time. */
int sd_allgather_u64_enqueue(const uint64_t *mine, int32_t count);
int sd_allgather_u64_result(uint64_t *all, int32_t count);

/* ---- desync detection ---- */

/*
 * The fingerprint of the collective the next flag kernels belong to, as
 * comm/internal/desync encodes it: seq (its number, 1 for the first),
 * what (operation, operator, element kind, root), buf (the buffer's
 * number), off and n (the element range). Every flag kernel launched (or
 * captured into a CUDA graph) from now on carries it: at its entry barrier
 * each block publishes it to every peer beside its flag and compares the
 * peers' with it (all words but seq, which a replayed graph keeps from its
 * capture). A block that finds another call stops before touching data,
 * every kernel of this PE stops with it, and the wait fails with
 * SD_ERR_DESYNC and the calls in its message (sd_desync_info gives them as
 * words). seq = 0 turns the check off (the default after sd_init); every PE
 * must agree on that. Peers out of pointer reach use NVSHMEM's collectives,
 * which carry no fingerprint: the caller compares calls itself there (with
 * sd_allgather_u64).
 */
int sd_set_call(uint64_t seq, uint64_t what, uint64_t buf, uint64_t off, uint64_t n);
/*
 * After SD_ERR_DESYNC: the fingerprints of the collective where the PEs
 * differed, SD_CALL_WORDS words per PE in PE order, into calls[0..cap) (at
 * most cap / SD_CALL_WORDS PEs), *npes the number of PEs, and the name of
 * the operation that found it in op[op_cap]. *npes is 0 when no desync
 * was found.
 */
int sd_desync_info(uint64_t *calls, int32_t cap, int32_t *npes, char *op, size_t op_cap);

/* ---- waiting ---- */

/*
 * Waits until everything enqueued on the stream is done, or timeout_ns passed.
 * SD_ERR_TIMEOUT also when an in-kernel wait gave up; SD_ERR_DESYNC when a
 * kernel found peers in another collective.
 */
int sd_stream_wait(int64_t timeout_ns);
/* Sets *done to 1 when everything enqueued is done, else 0, without waiting;
 * SD_ERR_TIMEOUT when an in-kernel wait gave up, SD_ERR_DESYNC as sd_stream_wait. */
int sd_stream_query(int32_t *done);
/* Records an event on the stream. */
int sd_event_record(uint64_t *event);
/* Waits for an event like sd_stream_wait. */
int sd_event_wait(uint64_t event, int64_t timeout_ns);
/* sd_stream_query for an event. */
int sd_event_query(uint64_t event, int32_t *done);
/* Destroys an event. */
int sd_event_destroy(uint64_t event);
/*
 * After SD_ERR_TIMEOUT: the PEs that had not arrived at the wait that gave up
 * (missing[0..*count), at most cap) and the operation's name in op[op_cap].
 */
int sd_timeout_info(int32_t *missing, int32_t cap, int32_t *count, char *op, size_t op_cap);
/*
 * The caller gave up waiting (its own deadline, or a peer it saw die): the
 * PEs are out of step, so collectives are refused from now on and
 * sd_finalize will not wait for peers.
 */
int sd_abandon(void);

/* ---- plain device memory and copies (for the compute engine as well) ---- */

int sd_dev_alloc(size_t bytes, uint64_t *ptr);
int sd_dev_free(uint64_t ptr);
/* Synchronous copies; dst/src are device addresses (uint64) or host pointers. */
int sd_copy_htod(uint64_t dst, const void *src, size_t bytes);
int sd_copy_dtoh(void *dst, uint64_t src, size_t bytes);
int sd_copy_dtod(uint64_t dst, uint64_t src, size_t bytes);
int sd_memset(uint64_t dst, int32_t value, size_t bytes);

/* ---- measurements (benchmarks) ---- */

/*
 * Runs iters allreduces (after warmup ones) between two CUDA events on the
 * stream and returns the elapsed milliseconds. Collective.
 */
int sd_time_allreduce(sd_buf *b, size_t n, int32_t dtype, int32_t op, int32_t algo,
                      int32_t warmup, int32_t iters, float *ms);
/* Runs iters barriers the same way. Collective. */
int sd_time_barrier(int32_t warmup, int32_t iters, float *ms);
/* Times iters device-to-device cudaMemcpyAsync of bytes (local, not collective). */
int sd_time_copy(size_t bytes, int32_t warmup, int32_t iters, float *ms);

#ifdef __cplusplus
}
#endif

#endif /* SYMDDP_CUDA_H */
