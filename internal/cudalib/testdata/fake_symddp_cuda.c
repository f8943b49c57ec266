/*
 * fake_symddp_cuda.c: a stand-in for libsymddp_cuda.so for tests on machines
 * without a GPU. It implements the whole C ABI (cuda/symddp_cuda.h) for a job
 * of one PE in host memory: "device" addresses are host addresses, the
 * collectives of one PE leave the data as it is (the sum of one value is the
 * value, Mean divides by 1), and every wait is over at once.
 *
 * Environment knobs, read when called:
 *   FAKE_SD_NO_DEVICE=1    sd_device_count fails with SD_ERR_NO_DEVICE
 *   FAKE_SD_ABI=n          sd_abi_version returns n
 *   FAKE_SD_TIMEOUT=1      queries of the stream and events fail with
 *                          SD_ERR_TIMEOUT and sd_timeout_info names PE 1
 *   FAKE_SD_DESYNC=CALLS   as if peers 1, 2, ... had made the calls CALLS
 *                          (SD_CALL_WORDS numbers each, comma-separated; PEs
 *                          separated by ';'): with the desync check on
 *                          (sd_set_call), queries of the stream and events
 *                          fail with SD_ERR_DESYNC and sd_desync_info gives
 *                          the calls after this PE's own; an allgather of
 *                          SD_CALL_WORDS words gives them after this PE's
 *   FAKE_SD_CALL_LOG=FILE  every sd_set_call appends "call" and its words to
 *                          FILE, and every collective enqueued "op" and its
 *                          name, one line each (while the collectives
 *                          stream is forked: "op arrival" before it, as the
 *                          library's arrival barrier), and "fork" and "join"
 *
 * The collectives stream (sd_comm_fork, sd_comm_join) is a flag here: while
 * it is set the blocking entry points that the library refuses then
 * (sd_alloc, sd_free, sd_allgather_u64*, the timings) fail with
 * SD_ERR_STATE. sd_trace_stamp writes a counter that grows by one per stamp
 * (the order the stamps were enqueued in, which is the order they ran in).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_desync.h"
#include "symddp_cuda.h"

static __thread char fake_err[1024];
static int fake_up, fake_done, fake_failed, fake_pending;
static uint64_t fake_gather[8];
static int fake_gather_count;
static uint64_t fake_next_event = 1;
static uint64_t fake_call[SD_CALL_WORDS]; /* sd_set_call's words */
static int fake_check;
static const char *fake_op = "collective"; /* the last collective enqueued */
static int fake_forked;                     /* sd_comm_fork without its sd_comm_join */
static uint64_t fake_trace[SD_TRACE_SLOTS];
static uint64_t fake_clock;
/* The desync reported (FAKE_SD_DESYNC): every PE's call, this PE's first. */
#define FAKE_MAX_PES 16
static uint64_t fake_calls[FAKE_MAX_PES * SD_CALL_WORDS];
static int fake_desync_pes;

static int desync_calls(void);

/* Appends a line to FAKE_SD_CALL_LOG, if set. */
static void log_line(const char *line) {
    const char *log = getenv("FAKE_SD_CALL_LOG");
    if (!log || !*log) return;
    FILE *f = fopen(log, "a");
    if (!f) return;
    fprintf(f, "%s\n", line);
    fclose(f);
}

/* Notes the collective enqueued (sd_desync_info's operation, the log). */
static void enqueued(const char *op) {
    char line[64];
    if (fake_forked && strcmp(op, "barrier") != 0) log_line("op arrival");
    fake_op = op;
    snprintf(line, sizeof line, "op %s", op);
    log_line(line);
}

struct sd_buf {
    unsigned char *base;
    size_t bytes;
};

static int fail(int code, const char *msg) {
    snprintf(fake_err, sizeof fake_err, "fake: %s", msg);
    return code;
}

static int env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static int need_up(void) {
    if (!fake_up) return fail(SD_ERR_STATE, "the runtime is not initialised");
    if (fake_failed) return fail(SD_ERR_STATE, "an earlier wait gave up");
    return SD_OK;
}

/* need_up, and SD_ERR_STATE while the collectives stream is forked. */
static int need_joined(void) {
    int rc = need_up();
    if (rc) return rc;
    if (fake_forked) return fail(SD_ERR_STATE, "the collectives stream is forked (sd_comm_fork): join it first");
    return SD_OK;
}

static int span(const sd_buf *b, size_t off, size_t n) {
    if (!b) return fail(SD_ERR_ARG, "NULL buffer");
    if (off > b->bytes || n > b->bytes - off) return fail(SD_ERR_ARG, "span past the buffer");
    return SD_OK;
}

const char *sd_last_error(void) { return fake_err; }

int sd_abi_version(void) {
    const char *v = getenv("FAKE_SD_ABI");
    return v && *v ? atoi(v) : SD_ABI_VERSION;
}

int sd_device_count(int32_t *count) {
    if (env_on("FAKE_SD_NO_DEVICE"))
        return fail(SD_ERR_NO_DEVICE, "no usable GPU: cudaGetDeviceCount: no CUDA-capable device is detected");
    *count = 1;
    return SD_OK;
}

int sd_uniqueid_size(size_t *size) {
    *size = 128;
    return SD_OK;
}

int sd_get_uniqueid(void *out, size_t cap) {
    if (cap < 128) return fail(SD_ERR_ARG, "unique id needs 128 bytes");
    memset(out, 0x5a, 128);
    return SD_OK;
}

int sd_init(const sd_init_args *a, sd_info *info) {
    if (fake_up) return fail(SD_ERR_STATE, "NVSHMEM is already initialised in this process");
    if (fake_done) return fail(SD_ERR_STATE, "NVSHMEM cannot start again in a process that finalized it");
    if (a->bootstrap != SD_BOOT_UNIQUEID || a->npes != 1 || a->pe != 0 || a->uid_len != 128)
        return fail(SD_ERR_ARG, "the fake runs one PE with a unique id");
    memset(info, 0, sizeof *info);
    info->npes = 1;
    info->device_count = 1;
    info->sm_count = 1;
    info->max_blocks = 2;
    info->all_reachable = 1;
    info->nvshmem_major = 3;
    snprintf(info->device_name, sizeof info->device_name, "fake GPU");
    fake_up = 1;
    return SD_OK;
}

int sd_finalize(int32_t collective) {
    (void)collective;
    if (!fake_up) return fail(SD_ERR_STATE, "not initialised");
    fake_up = 0;
    fake_done = 1;
    return SD_OK;
}

int sd_stream(uint64_t *stream) {
    *stream = 0x5d;
    return SD_OK;
}

int sd_set_timeout(int64_t ns) {
    (void)ns;
    return SD_OK;
}

int sd_set_one_shot_max(size_t bytes) {
    (void)bytes;
    return SD_OK;
}

int sd_alloc(size_t bytes, sd_buf **out) {
    int rc = need_joined();
    if (rc) return rc;
    sd_buf *b = calloc(1, sizeof *b);
    if (!b) return fail(SD_ERR_NO_MEMORY, "calloc");
    b->base = calloc(1, bytes ? bytes : 16);
    if (!b->base) {
        free(b);
        return fail(SD_ERR_NO_MEMORY, "calloc");
    }
    b->bytes = bytes;
    *out = b;
    return SD_OK;
}

int sd_free(sd_buf *b) {
    int rc = need_joined();
    if (rc) return rc;
    free(b->base);
    free(b);
    return SD_OK;
}

int sd_buf_ptr(const sd_buf *b, uint64_t *ptr) {
    *ptr = (uint64_t)(uintptr_t)b->base;
    return SD_OK;
}

int sd_peer_ptr(const sd_buf *b, int32_t pe, uint64_t *ptr) {
    if (pe != 0) return fail(SD_ERR_ARG, "PE out of range");
    *ptr = (uint64_t)(uintptr_t)b->base;
    return SD_OK;
}

int sd_put(sd_buf *b, size_t off, const void *src, size_t bytes, int32_t pe) {
    int rc = need_up();
    if (!rc) rc = span(b, off, bytes);
    if (rc) return rc;
    if (pe != 0) return fail(SD_ERR_ARG, "PE out of range");
    if (bytes) memcpy(b->base + off, src, bytes);
    return SD_OK;
}

int sd_get(void *dst, const sd_buf *b, size_t off, size_t bytes, int32_t pe) {
    int rc = need_up();
    if (!rc) rc = span(b, off, bytes);
    if (rc) return rc;
    if (pe != 0) return fail(SD_ERR_ARG, "PE out of range");
    if (bytes) memcpy(dst, b->base + off, bytes);
    return SD_OK;
}

int sd_put_signal(sd_buf *b, size_t off, const void *src, size_t bytes, sd_buf *sig,
                  size_t sig_off, uint64_t value, int32_t op, int32_t pe) {
    int rc = sd_put(b, off, src, bytes, pe);
    if (!rc) rc = span(sig, sig_off, 8);
    if (rc) return rc;
    uint64_t w;
    memcpy(&w, sig->base + sig_off, 8);
    w = op == SD_SIGNAL_ADD ? w + value : value;
    memcpy(sig->base + sig_off, &w, 8);
    return SD_OK;
}

int sd_read_u64(const sd_buf *b, size_t off, uint64_t *value) {
    int rc = need_up();
    if (!rc) rc = span(b, off, 8);
    if (rc) return rc;
    memcpy(value, b->base + off, 8);
    return SD_OK;
}

int sd_quiet(void) { return need_up(); }

int sd_barrier_enqueue(void) {
    enqueued("barrier");
    return need_up();
}

static int elems(const sd_buf *b, size_t off, size_t n, int32_t dtype) {
    size_t es = dtype == SD_F32 ? 4 : dtype == SD_BF16 ? 2 : 0;
    if (!es) return fail(SD_ERR_ARG, "unknown element type");
    return span(b, off * es, n * es);
}

int sd_allreduce_enqueue(sd_buf *b, size_t off, size_t n, int32_t dtype, int32_t op, int32_t algo) {
    enqueued("allreduce");
    int rc = need_up();
    if (!rc) rc = elems(b, off, n, dtype);
    if (rc) return rc;
    if (op < SD_SUM || op > SD_MIN || algo < SD_ALGO_AUTO || algo > SD_ALGO_NVSHMEM)
        return fail(SD_ERR_ARG, "unknown operator or algorithm");
    return SD_OK; /* one PE: the reduction of one value is the value */
}

int sd_reduce_enqueue(sd_buf *b, size_t off, size_t n, int32_t dtype, int32_t op, int32_t root) {
    enqueued("reduce");
    int rc = need_up();
    if (!rc) rc = elems(b, off, n, dtype);
    if (rc) return rc;
    if (root != 0 || op < SD_SUM || op > SD_MIN) return fail(SD_ERR_ARG, "bad root or operator");
    return SD_OK;
}

int sd_broadcast_enqueue(sd_buf *b, size_t off, size_t bytes, int32_t root) {
    enqueued("broadcast");
    int rc = need_up();
    if (!rc) rc = span(b, off, bytes);
    if (rc) return rc;
    if (root != 0) return fail(SD_ERR_ARG, "bad root");
    return SD_OK;
}

/* The shard checks of the sharded collectives; one PE's shard is the whole range. */
static int shard(const sd_buf *b, size_t lo, size_t hi, size_t largest, size_t es) {
    if (!es) return fail(SD_ERR_ARG, "unknown element type");
    if (hi < lo || hi - lo > largest) return fail(SD_ERR_ARG, "bad shard");
    return span(b, lo * es, (hi - lo) * es);
}

int sd_reduce_scatter_enqueue(sd_buf *b, size_t lo, size_t hi, size_t largest, int32_t dtype, int32_t op) {
    enqueued("reducescatter");
    int rc = need_up();
    if (!rc) rc = shard(b, lo, hi, largest, dtype == SD_F32 ? 4 : dtype == SD_BF16 ? 2 : 0);
    if (rc) return rc;
    if (op < SD_SUM || op > SD_MIN) return fail(SD_ERR_ARG, "unknown operator");
    return SD_OK; /* one PE: its shard reduced over one PE is what it holds */
}

int sd_allgather_enqueue(sd_buf *b, size_t lo, size_t hi, size_t largest) {
    enqueued("allgather");
    int rc = need_up();
    if (!rc) rc = shard(b, lo, hi, largest, 1);
    return rc; /* one PE: no peer to copy to */
}

int sd_allgather_u64_enqueue(const uint64_t *mine, int32_t count) {
    enqueued("allgather_u64");
    int rc = need_joined();
    if (rc) return rc;
    if (count < 1 || count > 8) return fail(SD_ERR_ARG, "count");
    if (fake_pending) return fail(SD_ERR_STATE, "previous allgather not collected");
    memcpy(fake_gather, mine, (size_t)count * 8);
    fake_gather_count = count;
    fake_pending = 1;
    return SD_OK;
}

int sd_allgather_u64_result(uint64_t *all, int32_t count) {
    if (!fake_pending || count != fake_gather_count) return fail(SD_ERR_STATE, "no allgather");
    memcpy(all, fake_gather, (size_t)count * 8);
    fake_pending = 0;
    if (count == SD_CALL_WORDS) { /* the peers' calls of FAKE_SD_DESYNC */
        const int pes = desync_calls();
        for (int p = 1; p < pes; p++)
            memcpy(all + (size_t)p * SD_CALL_WORDS, fake_calls + (size_t)p * SD_CALL_WORDS,
                   SD_CALL_WORDS * sizeof(uint64_t));
    }
    return SD_OK;
}

int sd_allgather_u64(const uint64_t *mine, int32_t count, uint64_t *all) {
    int rc = sd_allgather_u64_enqueue(mine, count);
    return rc ? rc : sd_allgather_u64_result(all, count);
}

/* Reads FAKE_SD_DESYNC's calls of PEs 1, 2, ... after this PE's own into
 * fake_calls; the number of PEs, or 0 when the variable is unset or bad. */
static int desync_calls(void) {
    const char *v = getenv("FAKE_SD_DESYNC");
    if (!v || !*v) return 0;
    memcpy(fake_calls, fake_call, sizeof fake_call);
    int pes = 1, w = 0;
    while (*v && pes < FAKE_MAX_PES) {
        char *end = NULL;
        fake_calls[pes * SD_CALL_WORDS + w] = strtoull(v, &end, 0);
        if (end == v) return 0;
        v = end;
        if (++w == SD_CALL_WORDS) {
            w = 0;
            pes++;
            if (*v == ';') v++;
        } else if (*v == ',') {
            v++;
        } else {
            return 0;
        }
    }
    return w == 0 ? pes : 0;
}

static int query(int32_t *done) {
    if (env_on("FAKE_SD_TIMEOUT")) {
        fake_failed = 1;
        return fail(SD_ERR_TIMEOUT, "an in-kernel wait of barrier gave up without PE 1");
    }
    if (fake_check && (fake_desync_pes = desync_calls()) > 0) {
        fake_failed = 1;
        char text[768], msg[1024];
        if (!sd_desync_describe(text, sizeof text, fake_calls, fake_desync_pes))
            snprintf(text, sizeof text, "the calls read back alike");
        snprintf(msg, sizeof msg, "stream: PE 0: %s: %s: PEs called different collectives (desync)", fake_op,
                 text);
        return fail(SD_ERR_DESYNC, msg);
    }
    *done = 1;
    return SD_OK;
}

int sd_stream_wait(int64_t ns) {
    int32_t done;
    (void)ns;
    return query(&done);
}

int sd_stream_query(int32_t *done) { return query(done); }

int sd_event_record(uint64_t *event) {
    int rc = need_up();
    if (rc) return rc;
    *event = fake_next_event++;
    return SD_OK;
}

int sd_event_query(uint64_t event, int32_t *done) {
    if (!event) return fail(SD_ERR_ARG, "no event");
    return query(done);
}

int sd_event_wait(uint64_t event, int64_t ns) {
    int32_t done;
    (void)ns;
    return sd_event_query(event, &done);
}

int sd_event_destroy(uint64_t event) {
    (void)event;
    return SD_OK;
}

int sd_timeout_info(int32_t *missing, int32_t cap, int32_t *count, char *op, size_t op_cap) {
    *count = 0;
    if (env_on("FAKE_SD_TIMEOUT")) {
        if (cap > 0) missing[0] = 1;
        *count = 1;
        if (op && op_cap) snprintf(op, op_cap, "barrier");
    }
    return SD_OK;
}

int sd_set_call(uint64_t seq, uint64_t what, uint64_t buf, uint64_t off, uint64_t n) {
    const uint64_t w[SD_CALL_WORDS] = {seq, what, buf, off, n};
    fake_check = seq != 0;
    memcpy(fake_call, w, sizeof w);
    char line[160];
    snprintf(line, sizeof line, "call %llu %llu %llu %llu %llu", (unsigned long long)seq,
             (unsigned long long)what, (unsigned long long)buf, (unsigned long long)off,
             (unsigned long long)n);
    log_line(line);
    return SD_OK;
}

int sd_desync_info(uint64_t *calls, int32_t cap, int32_t *npes, char *op, size_t op_cap) {
    *npes = 0;
    if (op && op_cap) op[0] = 0;
    if (!fake_desync_pes) return SD_OK;
    if (cap < fake_desync_pes * SD_CALL_WORDS) return fail(SD_ERR_ARG, "sd_desync_info: no room");
    memcpy(calls, fake_calls, (size_t)fake_desync_pes * SD_CALL_WORDS * sizeof(uint64_t));
    *npes = fake_desync_pes;
    if (op && op_cap) snprintf(op, op_cap, "%s", fake_op);
    return SD_OK;
}

int sd_abandon(void) {
    fake_failed = 1;
    return SD_OK;
}

int sd_dev_alloc(size_t bytes, uint64_t *ptr) {
    void *p = calloc(1, bytes ? bytes : 16);
    if (!p) return fail(SD_ERR_NO_MEMORY, "calloc");
    *ptr = (uint64_t)(uintptr_t)p;
    return SD_OK;
}

int sd_dev_free(uint64_t ptr) {
    free((void *)(uintptr_t)ptr);
    return SD_OK;
}

int sd_copy_htod(uint64_t dst, const void *src, size_t bytes) {
    if (bytes) memcpy((void *)(uintptr_t)dst, src, bytes);
    return SD_OK;
}

int sd_copy_dtoh(void *dst, uint64_t src, size_t bytes) {
    if (bytes) memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return SD_OK;
}

int sd_copy_dtod(uint64_t dst, uint64_t src, size_t bytes) {
    if (bytes) memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    return SD_OK;
}

int sd_memset(uint64_t dst, int32_t value, size_t bytes) {
    if (bytes) memset((void *)(uintptr_t)dst, value, bytes);
    return SD_OK;
}

int sd_time_allreduce(sd_buf *b, size_t n, int32_t dtype, int32_t op, int32_t algo,
                      int32_t warmup, int32_t iters, float *ms) {
    (void)warmup;
    int rc = need_joined();
    if (rc) return rc;
    rc = sd_allreduce_enqueue(b, 0, n, dtype, op, algo);
    if (rc) return rc;
    *ms = 0.001f * (float)iters;
    return SD_OK;
}

int sd_time_barrier(int32_t warmup, int32_t iters, float *ms) {
    (void)warmup;
    *ms = 0.001f * (float)iters;
    return need_joined();
}

int sd_time_copy(size_t bytes, int32_t warmup, int32_t iters, float *ms) {
    (void)bytes;
    (void)warmup;
    *ms = 0.001f * (float)iters;
    return SD_OK;
}

int sd_comm_fork(void) {
    int rc = need_up();
    if (rc) return rc;
    fake_forked = 1;
    log_line("fork");
    return SD_OK;
}

int sd_comm_join(void) {
    if (!fake_up) return fail(SD_ERR_STATE, "the runtime is not initialised");
    if (!fake_forked) return fail(SD_ERR_STATE, "sd_comm_join: the collectives stream is not forked");
    fake_forked = 0;
    log_line("join");
    return SD_OK;
}

int sd_trace_stamp(int32_t on_comm, int32_t slot) {
    int rc = need_up();
    if (rc) return rc;
    if (slot < 0 || slot >= SD_TRACE_SLOTS) return fail(SD_ERR_ARG, "sd_trace_stamp: slot out of range");
    if (on_comm && !fake_forked) return fail(SD_ERR_STATE, "sd_trace_stamp: the collectives stream is not forked");
    fake_trace[slot] = ++fake_clock;
    return SD_OK;
}

int sd_trace_read(uint64_t *out, int32_t n) {
    int rc = need_up();
    if (rc) return rc;
    if (n < 0 || n > SD_TRACE_SLOTS) return fail(SD_ERR_ARG, "sd_trace_read: slots out of range");
    if (n) memcpy(out, fake_trace, (size_t)n * sizeof(uint64_t));
    return SD_OK;
}
