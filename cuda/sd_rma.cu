/*
 * sd_rma.cu: one-sided transfers between host memory and a PE's copy of a
 * symmetric buffer, signals, and the small allgather of control words.
 *
 * A peer reachable by pointer (nvshmem_ptr != NULL: same GPU or a P2P peer)
 * is written and read at its mapped address on the library's stream with
 * cudaMemcpyAsync; where that call rejects the address ("invalid argument":
 * seen on a 2-GPU host for an address NVSHMEM maps from the other GPU), the
 * transfer goes through the staging buffer and a copy kernel instead, since
 * kernels reach such addresses (sd_host_to_mapped, sd_mapped_to_host; the
 * fallback has not run on a multi-GPU host yet). Other peers go through the
 * symmetric staging buffer and NVSHMEM's on-stream put/get. Every call here returns when its transfer
 * is complete (delivered), so Fence and Quiet have nothing left to wait for
 * except NVSHMEM puts (sd_quiet).
 */
#include <stdlib.h>
#include <string.h>

#include "sd_internal.h"

/* Checks a byte span of b on PE pe. */
static int sd_check_span(const char *what, const sd_buf *b, size_t off, size_t bytes, int pe) {
    if (!b) return SD_FAIL(SD_ERR_ARG, "%s: NULL buffer", what);
    if (pe < 0 || pe >= g_sd.npes) return SD_FAIL(SD_ERR_ARG, "%s: PE %d of %d", what, pe, g_sd.npes);
    if (off > b->bytes || bytes > b->bytes - off)
        return SD_FAIL(SD_ERR_ARG, "%s: bytes [%zu, %zu) of a %zu-byte buffer", what, off,
                       off + bytes, b->bytes);
    return SD_OK;
}

/* Copies n bytes from src to dst, either of them a peer's mapped address. */
__global__ void sd_copy_bytes_kernel(char *__restrict__ dst, const char *__restrict__ src, size_t n) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
        const size_t n16 = n / 16;
        for (; i < n16; i += stride) ((uint4 *)dst)[i] = ((const uint4 *)src)[i];
        for (i = n16 * 16 + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
        return;
    }
    for (; i < n; i += stride) dst[i] = src[i];
}

static int sd_copy_on_device(void *dst, const void *src, size_t n) {
    size_t blocks = (n / 16 + SD_THREADS - 1) / SD_THREADS;
    if (blocks < 1) blocks = 1;
    if (blocks > 64) blocks = 64;
    sd_copy_bytes_kernel<<<(unsigned)blocks, SD_THREADS, 0, g_sd.stream>>>((char *)dst, (const char *)src, n);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/* cudaMemcpyAsync, or false when it rejected the address as invalid (the
 * caller then copies through a kernel); other errors are failures. */
static int sd_try_memcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, bool *done) {
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, g_sd.stream);
    *done = e == cudaSuccess;
    if (e == cudaSuccess) return SD_OK;
    (void)cudaGetLastError(); /* not sticky: clear it */
    if (e == cudaErrorInvalidValue) return SD_OK;
    return sd_fail_cuda(__FILE__, __LINE__, "cudaMemcpyAsync", e);
}

/* Host src to a mapped address, enqueued on the stream: a plain copy, or
 * staged and then a kernel where the copy is refused (see the top). */
static int sd_host_to_mapped(void *dst, const void *src, size_t bytes, int pe) {
    bool done = false;
    SD_TRY(sd_try_memcpy(dst, src, bytes, cudaMemcpyHostToDevice, &done));
    if (done) return SD_OK;
    if (pe == g_sd.pe) return SD_FAIL(SD_ERR, "cudaMemcpyAsync to this PE's own buffer: invalid argument");
    for (size_t k = 0; k < bytes; k += SD_STAGING_BYTES) {
        const size_t m = bytes - k < SD_STAGING_BYTES ? bytes - k : SD_STAGING_BYTES;
        SD_CUDA(cudaMemcpyAsync(g_sd.staging, (const char *)src + k, m, cudaMemcpyHostToDevice, g_sd.stream));
        SD_TRY(sd_copy_on_device((char *)dst + k, g_sd.staging, m));
    }
    return SD_OK;
}

/* A mapped address to host dst, the other way round. */
static int sd_mapped_to_host(void *dst, const void *src, size_t bytes, int pe) {
    bool done = false;
    SD_TRY(sd_try_memcpy(dst, src, bytes, cudaMemcpyDeviceToHost, &done));
    if (done) return SD_OK;
    if (pe == g_sd.pe) return SD_FAIL(SD_ERR, "cudaMemcpyAsync from this PE's own buffer: invalid argument");
    for (size_t k = 0; k < bytes; k += SD_STAGING_BYTES) {
        const size_t m = bytes - k < SD_STAGING_BYTES ? bytes - k : SD_STAGING_BYTES;
        SD_TRY(sd_copy_on_device(g_sd.staging, (const char *)src + k, m));
        SD_CUDA(cudaMemcpyAsync((char *)dst + k, g_sd.staging, m, cudaMemcpyDeviceToHost, g_sd.stream));
    }
    return SD_OK;
}

/* Puts host src into pe's copy at dst (a symmetric address) through the staging buffer. */
static int sd_put_staged(char *dst, const char *src, size_t bytes, int pe) {
    for (size_t k = 0; k < bytes; k += SD_STAGING_BYTES) {
        const size_t m = bytes - k < SD_STAGING_BYTES ? bytes - k : SD_STAGING_BYTES;
        SD_CUDA(cudaMemcpyAsync(g_sd.staging, src + k, m, cudaMemcpyHostToDevice, g_sd.stream));
        nvshmemx_putmem_on_stream(dst + k, g_sd.staging, m, pe, g_sd.stream);
        SD_CUDA(cudaGetLastError());
    }
    g_sd.used_rma = 1;
    return SD_OK;
}

extern "C" int sd_put(sd_buf *b, size_t off, const void *src, size_t bytes, int32_t pe) {
    SD_TRY(sd_require_init("sd_put"));
    SD_TRY(sd_check_span("sd_put", b, off, bytes, pe));
    if (!bytes) return SD_OK;
    if (b->h_peers[pe]) {
        SD_TRY(sd_host_to_mapped((char *)b->h_peers[pe] + off, src, bytes, pe));
    } else {
        SD_TRY(sd_put_staged((char *)b->base + off, (const char *)src, bytes, pe));
        nvshmemx_quiet_on_stream(g_sd.stream);
        g_sd.used_rma = 0;
    }
    return sd_stream_wait((int64_t)g_sd.timeout_ns);
}

extern "C" int sd_get(void *dst, const sd_buf *b, size_t off, size_t bytes, int32_t pe) {
    SD_TRY(sd_require_init("sd_get"));
    SD_TRY(sd_check_span("sd_get", b, off, bytes, pe));
    if (!bytes) return SD_OK;
    if (b->h_peers[pe]) {
        SD_TRY(sd_mapped_to_host(dst, (const char *)b->h_peers[pe] + off, bytes, pe));
        return sd_stream_wait((int64_t)g_sd.timeout_ns);
    }
    for (size_t k = 0; k < bytes; k += SD_STAGING_BYTES) {
        const size_t m = bytes - k < SD_STAGING_BYTES ? bytes - k : SD_STAGING_BYTES;
        nvshmemx_getmem_on_stream(g_sd.staging, (const char *)b->base + off + k, m, pe, g_sd.stream);
        SD_CUDA(cudaGetLastError());
        SD_CUDA(cudaMemcpyAsync((char *)dst + k, g_sd.staging, m, cudaMemcpyDeviceToHost,
                                g_sd.stream));
    }
    return sd_stream_wait((int64_t)g_sd.timeout_ns);
}

/* Updates a signal word (a peer's, by pointer) after everything before it on the stream. */
__global__ void sd_signal_kernel(unsigned long long *sig, unsigned long long value, int add) {
    __threadfence_system();
    if (add)
        atomicAdd_system(sig, value);
    else
        atomicExch_system(sig, value);
    __threadfence_system();
}

extern "C" int sd_put_signal(sd_buf *b, size_t off, const void *src, size_t bytes, sd_buf *sig,
                             size_t sig_off, uint64_t value, int32_t op, int32_t pe) {
    SD_TRY(sd_require_init("sd_put_signal"));
    SD_TRY(sd_check_span("sd_put_signal", b, off, bytes, pe));
    SD_TRY(sd_check_span("sd_put_signal (signal)", sig, sig_off, sizeof(uint64_t), pe));
    if (sig_off % sizeof(uint64_t))
        return SD_FAIL(SD_ERR_ARG, "sd_put_signal: signal offset %zu is not 8-byte aligned", sig_off);
    if (op != SD_SIGNAL_SET && op != SD_SIGNAL_ADD)
        return SD_FAIL(SD_ERR_ARG, "sd_put_signal: unknown signal op %d", op);
    if (b->h_peers[pe] && sig->h_peers[pe]) {
        if (bytes) SD_TRY(sd_host_to_mapped((char *)b->h_peers[pe] + off, src, bytes, pe));
        sd_signal_kernel<<<1, 1, 0, g_sd.stream>>>(
            (unsigned long long *)((char *)sig->h_peers[pe] + sig_off), (unsigned long long)value,
            op == SD_SIGNAL_ADD);
        SD_CUDA(cudaGetLastError());
        return sd_stream_wait((int64_t)g_sd.timeout_ns);
    }
    /* Through NVSHMEM: all chunks but the last, quiet, then the last with the signal. */
    const size_t last = bytes > SD_STAGING_BYTES ? (bytes - 1) / SD_STAGING_BYTES * SD_STAGING_BYTES : 0;
    if (last) {
        SD_TRY(sd_put_staged((char *)b->base + off, (const char *)src, last, pe));
        nvshmemx_quiet_on_stream(g_sd.stream);
    }
    const size_t m = bytes - last;
    uint64_t *sig_addr = (uint64_t *)((char *)sig->base + sig_off);
    const int sig_op = op == SD_SIGNAL_ADD ? NVSHMEM_SIGNAL_ADD : NVSHMEM_SIGNAL_SET;
    if (m) {
        SD_CUDA(cudaMemcpyAsync(g_sd.staging, (const char *)src + last, m, cudaMemcpyHostToDevice,
                                g_sd.stream));
        nvshmemx_putmem_signal_on_stream((char *)b->base + off + last, g_sd.staging, m, sig_addr,
                                         value, sig_op, pe, g_sd.stream);
    } else {
        nvshmemx_signal_op_on_stream(sig_addr, value, sig_op, pe, g_sd.stream);
    }
    SD_CUDA(cudaGetLastError());
    nvshmemx_quiet_on_stream(g_sd.stream);
    g_sd.used_rma = 0;
    return sd_stream_wait((int64_t)g_sd.timeout_ns);
}

extern "C" int sd_read_u64(const sd_buf *b, size_t off, uint64_t *value) {
    if (!value) return SD_FAIL(SD_ERR_ARG, "sd_read_u64: NULL value");
    SD_TRY(sd_require_init("sd_read_u64"));
    SD_TRY(sd_check_span("sd_read_u64", b, off, sizeof(uint64_t), g_sd.pe));
    SD_CUDA(cudaMemcpyAsync(value, (const char *)b->base + off, sizeof(uint64_t),
                            cudaMemcpyDeviceToHost, g_sd.side));
    SD_CUDA(cudaStreamSynchronize(g_sd.side));
    return SD_OK;
}

extern "C" int sd_quiet(void) {
    SD_TRY(sd_require_init("sd_quiet"));
    if (g_sd.used_rma) {
        nvshmemx_quiet_on_stream(g_sd.stream);
        SD_CUDA(cudaGetLastError());
        g_sd.used_rma = 0;
    }
    return sd_stream_wait((int64_t)g_sd.timeout_ns);
}

/*
 * Every PE writes its record into slot [me] of every peer's control words
 * (by pointer), a flag barrier, each copies its own control words to the
 * host, a second barrier (no PE may overwrite a slot before all have read
 * it). Without pointer access to every peer: own slot, NVSHMEM barrier, gets
 * of every peer's own slot into the staging buffer, copy, barrier. All of it
 * is enqueued; the records pass through pinned host buffers.
 */
extern "C" int sd_allgather_u64_enqueue(const uint64_t *mine, int32_t count) {
    if (!mine || count < 1 || count > SD_CTRL_WORDS)
        return SD_FAIL(SD_ERR_ARG, "sd_allgather_u64: count %d (1..%d)", count, SD_CTRL_WORDS);
    SD_TRY(sd_require_joined("sd_allgather_u64"));
    if (g_sd.gather_pending)
        return SD_FAIL(SD_ERR_STATE, "sd_allgather_u64_enqueue: the previous allgather was not collected");
    const size_t rec = SD_CTRL_WORDS * sizeof(uint64_t);
    const size_t np = (size_t)g_sd.npes;
    const size_t my_slot = (size_t)g_sd.pe * SD_CTRL_WORDS;
    memset(g_sd.h_gather_in, 0, rec);
    memcpy(g_sd.h_gather_in, mine, (size_t)count * sizeof(uint64_t));
    if (g_sd.all_reachable) {
        const size_t ctrl_words = (size_t)(g_sd.ctrl - g_sd.flags);
        for (int j = 0; j < g_sd.npes; j++)
            SD_TRY(sd_host_to_mapped(g_sd.h_peer_area[j] + ctrl_words + my_slot, g_sd.h_gather_in, rec, j));
        SD_TRY(sd_launch_barrier(g_sd.stream));
        SD_CUDA(cudaMemcpyAsync(g_sd.h_gather_out, g_sd.ctrl, np * rec, cudaMemcpyDeviceToHost,
                                g_sd.stream));
        SD_TRY(sd_launch_barrier(g_sd.stream));
    } else {
        SD_CUDA(cudaMemcpyAsync(g_sd.ctrl + my_slot, g_sd.h_gather_in, rec, cudaMemcpyHostToDevice,
                                g_sd.stream));
        SD_TRY(sd_launch_barrier(g_sd.stream));
        for (int j = 0; j < g_sd.npes; j++) {
            nvshmemx_getmem_on_stream((char *)g_sd.staging + (size_t)j * rec,
                                      g_sd.ctrl + (size_t)j * SD_CTRL_WORDS, rec, j, g_sd.stream);
            SD_CUDA(cudaGetLastError());
        }
        SD_CUDA(cudaMemcpyAsync(g_sd.h_gather_out, g_sd.staging, np * rec, cudaMemcpyDeviceToHost,
                                g_sd.stream));
        SD_TRY(sd_launch_barrier(g_sd.stream));
    }
    g_sd.gather_pending = 1;
    return SD_OK;
}

extern "C" int sd_allgather_u64_result(uint64_t *all, int32_t count) {
    if (!all || count < 1 || count > SD_CTRL_WORDS)
        return SD_FAIL(SD_ERR_ARG, "sd_allgather_u64_result: count %d (1..%d)", count, SD_CTRL_WORDS);
    if (!g_sd.gather_pending)
        return SD_FAIL(SD_ERR_STATE, "sd_allgather_u64_result: no allgather was enqueued");
    int32_t done = 0;
    SD_TRY(sd_stream_query(&done));
    if (!done) return SD_FAIL(SD_ERR_STATE, "sd_allgather_u64_result: the allgather is not complete");
    for (size_t j = 0; j < (size_t)g_sd.npes; j++)
        memcpy(all + j * (size_t)count, g_sd.h_gather_out + j * SD_CTRL_WORDS,
               (size_t)count * sizeof(uint64_t));
    g_sd.gather_pending = 0;
    return SD_OK;
}

extern "C" int sd_allgather_u64(const uint64_t *mine, int32_t count, uint64_t *all) {
    SD_TRY(sd_allgather_u64_enqueue(mine, count));
    SD_TRY(sd_stream_wait((int64_t)g_sd.timeout_ns));
    return sd_allgather_u64_result(all, count);
}
