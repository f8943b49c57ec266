/*
 * sd_wait.cu: waiting for enqueued GPU work with a deadline, events, and the
 * report of a wait that gave up (which PEs had not arrived).
 *
 * The host never blocks in the driver: it polls cudaStreamQuery /
 * cudaEventQuery, spinning for the first millisecond (sd_spin_ns) and then
 * sleeping with a growing interval, until the work is done or the deadline
 * passes. After the work is done it checks the mapped word the kernels set
 * when one of their in-kernel waits gave up (see sd_flags.cuh): a timeout,
 * or peers found in another collective (a desync: the PEs' calls, read from
 * the row of call slots the kernel compared, go into the message).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sd_desync.h"
#include "sd_internal.h"

static int64_t sd_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static const char *sd_op_name(int op) {
    switch (op) {
    case SD_OP_BARRIER: return "barrier";
    case SD_OP_ALLREDUCE: return "allreduce";
    case SD_OP_REDUCE: return "reduce";
    case SD_OP_BROADCAST: return "broadcast";
    case SD_OP_REDUCE_SCATTER: return "reducescatter";
    case SD_OP_ALLGATHER: return "allgather";
    case SD_OP_ARRIVAL: return "arrival barrier";
    }
    return "collective";
}

/* Whether a kernel's wait gave up (the mapped host word it sets); false
 * before init and after finalize, when there is no word. */
static inline bool sd_kernel_gave_up(void) { return g_sd.h_failed && *(volatile int32_t *)g_sd.h_failed; }

/* Copies bytes of device memory at src to the host, on the side stream: the
 * legacy default stream could queue the read behind unrelated work, and the
 * main one behind a kernel that still waits. */
static cudaError_t sd_read_side(void *dst, const void *src, size_t bytes) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g_sd.side);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g_sd.side);
    return e;
}

/* The kernels' record of the first wait that gave up (zeroes if unreadable).
 * The block that records it sets failed first and recorded last; the mapped
 * word may tell the host in between, so a record being written is read
 * again (for up to about 0.1 s: it takes microseconds). */
static sd_dev_status sd_read_status(void) {
    sd_dev_status st;
    for (int tries = 0;; tries++) {
        memset(&st, 0, sizeof st);
        if (sd_read_side(&st, g_sd.d_status, sizeof st) != cudaSuccess) {
            (void)cudaGetLastError();
            memset(&st, 0, sizeof st);
            return st;
        }
        if (!st.failed || st.recorded || tries >= 1000) return st;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

/* The calls of every PE in the row of call slots where st's block found a
 * desync, into calls[npes * SD_CALL_WORDS]. */
static cudaError_t sd_read_calls(const sd_dev_status &st, uint64_t *calls) {
    const size_t row = sd_call_index(st.epoch, st.block, 0, g_sd.npes);
    return sd_read_side(calls, g_sd.calls + row, (size_t)g_sd.npes * SD_CALL_WORDS * sizeof(uint64_t));
}

/* Fails with SD_ERR_DESYNC: st says a kernel found a peer in another collective. */
static int sd_desync_failure(const char *what, const sd_dev_status &st) {
    const size_t n = (size_t)g_sd.npes * SD_CALL_WORDS;
    uint64_t *calls = (uint64_t *)calloc(n, sizeof(uint64_t));
    char text[768];
    text[0] = 0;
    if (!calls || sd_read_calls(st, calls) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(text, sizeof text, "PE %d's call differs (the calls could not be read)", st.peer);
    } else if (!sd_desync_describe(text, sizeof text, calls, g_sd.npes)) {
        snprintf(text, sizeof text, "PE %d's call differs, but the calls read back alike", st.peer);
    }
    free(calls);
    return SD_FAIL(SD_ERR_DESYNC, "%s: PE %d: %s: %s: PEs called different collectives (desync)", what,
                   g_sd.pe, sd_op_name(st.op), text);
}

/* Fails with SD_ERR_TIMEOUT (or SD_ERR_DESYNC) when a kernel reported a wait
 * that gave up. */
static int sd_check_device_status(const char *what) {
    if (!sd_kernel_gave_up()) return SD_OK;
    g_sd.failed = 1;
    const sd_dev_status st = sd_read_status();
    snprintf(g_sd.timeout_op, sizeof g_sd.timeout_op, "%s", sd_op_name(st.op));
    if (st.failed && st.desync) return sd_desync_failure(what, st);
    return SD_FAIL(SD_ERR_TIMEOUT,
                   "%s: PE %d: an in-kernel wait of %s (phase %d, block %d) gave up after %.3f s "
                   "without PE %d",
                   what, g_sd.pe, sd_op_name(st.op), st.phase, st.block,
                   (double)g_sd.timeout_ns / 1e9, st.peer);
}

/*
 * How long a wait spins before it sleeps: SYMDDP_CUDA_SPIN_US microseconds
 * (default 1000). The training step's host reads step k's report just after
 * launching step k+1, so its wait is about a step long; a step that ends
 * while the host sleeps is seen late, by a nanosleep's timer slack (50 us
 * for an ordinary Linux thread, whatever the nap asked for), and the host's
 * work for the next launch then starts late too. On the H200 `train` with
 * the small mlp (80 us steps, batch 256) ran 3.05M samples/s with 20 us of
 * spinning and 3.11M with 1000 (symbench gpu-train, two runs each, 2026-12-02).
 * A millisecond covers the short steps that are sensitive to it; longer
 * waits sleep after it, as before.
 */
static int64_t sd_spin_ns(void) {
    static const int64_t ns = [] {
        const char *v = getenv("SYMDDP_CUDA_SPIN_US");
        char *end = NULL;
        const long long us = v && *v ? strtoll(v, &end, 10) : -1;
        return (int64_t)(us >= 0 && end && *end == '\0' ? us : 1000) * 1000;
    }();
    return ns;
}

/* Polls query(handle) until it is no longer cudaErrorNotReady or the deadline passes. */
template <typename Query>
static int sd_poll(Query query, int64_t timeout_ns, const char *what) {
    const int64_t start = sd_now_ns();
    int64_t nap = 0;
    for (;;) {
        cudaError_t e = query();
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady) return sd_fail_cuda(__FILE__, __LINE__, what, e);
        if (sd_kernel_gave_up()) break; /* a kernel gave up: report it now */
        const int64_t waited = sd_now_ns() - start;
        if (timeout_ns > 0 && waited > timeout_ns) {
            g_sd.failed = 1;
            snprintf(g_sd.timeout_op, sizeof g_sd.timeout_op, "%s", what);
            return SD_FAIL(SD_ERR_TIMEOUT, "%s: PE %d: GPU work not finished after %.3f s", what,
                           g_sd.pe, (double)waited / 1e9);
        }
        if (waited > sd_spin_ns()) { /* spin, then sleep 1 us doubling up to 200 us */
            nap = nap ? (nap * 2 > 200000 ? 200000 : nap * 2) : 1000;
            struct timespec ts = {0, (long)nap};
            nanosleep(&ts, NULL);
        }
    }
    return sd_check_device_status(what);
}

/* Whether the main stream, and while forked the collectives stream too, are
 * done: cudaSuccess, cudaErrorNotReady or a failure. */
static cudaError_t sd_streams_query(void) {
    cudaError_t e = cudaStreamQuery(g_sd.stream);
    if (e == cudaSuccess && g_sd.forked && g_sd.comm) e = cudaStreamQuery(g_sd.comm);
    return e;
}

extern "C" int sd_stream_wait(int64_t timeout_ns) {
    if (!g_sd.stream) return SD_FAIL(SD_ERR_STATE, "sd_stream_wait: the runtime is not initialised");
    return sd_poll(sd_streams_query, timeout_ns, "stream");
}

/* Shared by the query functions: done or not, and a kernel's give-up. */
static int sd_query_result(cudaError_t e, int32_t *done, const char *what) {
    if (e == cudaErrorNotReady) {
        *done = 0;
        return sd_kernel_gave_up() ? sd_check_device_status(what) : SD_OK;
    }
    if (e != cudaSuccess) return sd_fail_cuda(__FILE__, __LINE__, what, e);
    *done = 1;
    return sd_check_device_status(what);
}

extern "C" int sd_stream_query(int32_t *done) {
    if (!done) return SD_FAIL(SD_ERR_ARG, "sd_stream_query: NULL argument");
    if (!g_sd.stream) return SD_FAIL(SD_ERR_STATE, "sd_stream_query: the runtime is not initialised");
    return sd_query_result(sd_streams_query(), done, "stream");
}

extern "C" int sd_event_query(uint64_t event, int32_t *done) {
    if (!done || !event) return SD_FAIL(SD_ERR_ARG, "sd_event_query: no event");
    return sd_query_result(cudaEventQuery((cudaEvent_t)(uintptr_t)event), done, "event");
}

extern "C" int sd_desync_info(uint64_t *calls, int32_t cap, int32_t *npes, char *op, size_t op_cap) {
    if (!npes || (cap > 0 && !calls)) return SD_FAIL(SD_ERR_ARG, "sd_desync_info: NULL argument");
    *npes = 0;
    if (op && op_cap) op[0] = 0;
    if (!g_sd.calls || !g_sd.npes) return SD_OK;
    const sd_dev_status st = sd_read_status();
    if (!st.failed || !st.desync) return SD_OK;
    if (cap < g_sd.npes * SD_CALL_WORDS)
        return SD_FAIL(SD_ERR_ARG, "sd_desync_info: room for %d words, %d PEs need %d", cap, g_sd.npes,
                       g_sd.npes * SD_CALL_WORDS);
    SD_CUDA(sd_read_calls(st, calls));
    *npes = g_sd.npes;
    if (op && op_cap) snprintf(op, op_cap, "%s", sd_op_name(st.op));
    return SD_OK;
}

extern "C" int sd_abandon(void) {
    g_sd.failed = 1;
    if (!g_sd.timeout_op[0]) snprintf(g_sd.timeout_op, sizeof g_sd.timeout_op, "host wait");
    return SD_OK;
}

extern "C" int sd_event_record(uint64_t *event) {
    if (!event) return SD_FAIL(SD_ERR_ARG, "sd_event_record: NULL argument");
    SD_TRY(sd_require_init("sd_event_record"));
    cudaEvent_t ev;
    SD_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    SD_CUDA(cudaEventRecord(ev, g_sd.stream));
    *event = (uint64_t)(uintptr_t)ev;
    return SD_OK;
}

extern "C" int sd_event_wait(uint64_t event, int64_t timeout_ns) {
    if (!event) return SD_FAIL(SD_ERR_ARG, "sd_event_wait: no event");
    cudaEvent_t ev = (cudaEvent_t)(uintptr_t)event;
    return sd_poll([ev]() { return cudaEventQuery(ev); }, timeout_ns, "event");
}

extern "C" int sd_event_destroy(uint64_t event) {
    if (!event) return SD_OK;
    SD_CUDA(cudaEventDestroy((cudaEvent_t)(uintptr_t)event));
    return SD_OK;
}

/*
 * The PEs missing at the wait that gave up. A kernel that gave up said which
 * phase and block it waited in and for which epoch: the peers whose slot in
 * that row is below the epoch had not arrived. When only the host gave up (the
 * kernel never finished), the peers behind this PE's own slot of the last
 * barrier row are reported.
 */
extern "C" int sd_timeout_info(int32_t *missing, int32_t cap, int32_t *count, char *op,
                               size_t op_cap) {
    if (!count) return SD_FAIL(SD_ERR_ARG, "sd_timeout_info: NULL count");
    *count = 0;
    if (!g_sd.flags || !g_sd.npes) return SD_OK;
    const sd_dev_status st = sd_read_status();
    int phase = 0, block = 0;
    uint64_t epoch = 0;
    if (st.failed) {
        phase = st.phase;
        block = st.block;
        epoch = st.epoch;
        if (op && op_cap) snprintf(op, op_cap, "%s", sd_op_name(st.op));
    } else if (op && op_cap) {
        snprintf(op, op_cap, "%s", g_sd.timeout_op[0] ? g_sd.timeout_op : "wait");
    }
    const size_t n = (size_t)g_sd.npes;
    uint64_t *row = (uint64_t *)malloc(n * sizeof(uint64_t));
    if (!row) return SD_FAIL(SD_ERR_NO_MEMORY, "sd_timeout_info: malloc");
    cudaError_t e = cudaMemcpyAsync(row, g_sd.flags + sd_flag_index(phase, block, 0, g_sd.npes),
                                    n * sizeof(uint64_t), cudaMemcpyDeviceToHost, g_sd.side);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g_sd.side);
    if (e != cudaSuccess) {
        free(row);
        return sd_fail_cuda(__FILE__, __LINE__, "cudaMemcpyAsync(flag row)", e);
    }
    if (!st.failed) epoch = row[g_sd.pe];
    for (int j = 0; j < g_sd.npes; j++) {
        if (j == g_sd.pe || row[j] >= epoch) continue;
        if (*count < cap && missing) missing[*count] = j;
        (*count)++;
    }
    free(row);
    return SD_OK;
}
