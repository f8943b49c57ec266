/*
 * sd_memory.cu: symmetric allocations (nvshmem_malloc, zeroed, with the
 * peers' addresses gathered once into a device array for the kernels) and
 * plain device memory with synchronous copies.
 */
#include <stdlib.h>
#include <string.h>

#include "sd_internal.h"

extern "C" int sd_alloc(size_t bytes, sd_buf **out) {
    if (!out) return SD_FAIL(SD_ERR_ARG, "sd_alloc: NULL argument");
    *out = NULL;
    SD_TRY(sd_require_joined("sd_alloc"));
    /* Nothing of ours may still run on the stream when NVSHMEM's own barrier starts. */
    SD_TRY(sd_stream_wait((int64_t)g_sd.timeout_ns));
    const size_t want = bytes ? bytes : 16;
    void *p = nvshmem_malloc(want);
    if (!p)
        return SD_FAIL(SD_ERR_NO_MEMORY,
                       "nvshmem_malloc(%zu) returned NULL: the symmetric heap "
                       "(NVSHMEM_SYMMETRIC_SIZE) is exhausted",
                       want);
    sd_buf *b = (sd_buf *)calloc(1, sizeof *b);
    const size_t np = (size_t)g_sd.npes;
    if (b) b->h_peers = (void **)calloc(np, sizeof(void *));
    if (!b || !b->h_peers) {
        free(b);
        return SD_FAIL(SD_ERR_NO_MEMORY, "sd_alloc: calloc of the buffer record");
    }
    b->base = p;
    b->bytes = bytes;
    b->reachable = 1;
    for (int j = 0; j < g_sd.npes; j++) {
        b->h_peers[j] = g_sd.force_nvshmem ? NULL : nvshmem_ptr(p, j);
        if (!b->h_peers[j]) b->reachable = 0;
    }
    /* From here a failure frees the record; the symmetric allocation p
     * stays (nvshmem_free is collective, and the peers are out of step). */
    int rc = SD_OK;
    cudaError_t e = cudaSuccess;
    if (g_sd.all_reachable && !b->reachable) {
        rc = SD_FAIL(SD_ERR_STATE, "nvshmem_ptr cannot reach every peer's copy of a new "
                     "%zu-byte buffer although it reaches their sync areas", bytes);
        goto fail;
    }
    if ((e = cudaMalloc((void **)&b->d_peers, np * sizeof(void *))) != cudaSuccess ||
        (e = cudaMemcpyAsync(b->d_peers, b->h_peers, np * sizeof(void *), cudaMemcpyHostToDevice,
                             g_sd.stream)) != cudaSuccess ||
        (e = cudaMemsetAsync(p, 0, want, g_sd.stream)) != cudaSuccess) {
        rc = sd_fail_cuda(__FILE__, __LINE__, "sd_alloc: peer table and zeroing", e);
        goto fail;
    }
    /* No peer may write into this buffer before this PE has zeroed it. */
    if ((rc = sd_launch_barrier(g_sd.stream)) != SD_OK || (rc = sd_stream_wait((int64_t)g_sd.timeout_ns)) != SD_OK)
        goto fail;
    *out = b;
    return SD_OK;
fail:
    if (b->d_peers) cudaFree(b->d_peers);
    free(b->h_peers);
    free(b);
    return rc;
}

extern "C" int sd_free(sd_buf *b) {
    if (!b) return SD_FAIL(SD_ERR_ARG, "sd_free: NULL buffer");
    SD_TRY(sd_require_joined("sd_free"));
    SD_TRY(sd_stream_wait((int64_t)g_sd.timeout_ns));
    nvshmem_free(b->base); /* collective, with NVSHMEM's barrier */
    const cudaError_t e = cudaFree(b->d_peers);
    free(b->h_peers);
    free(b);
    if (e != cudaSuccess) return sd_fail_cuda(__FILE__, __LINE__, "cudaFree(b->d_peers)", e);
    return SD_OK;
}

extern "C" int sd_buf_ptr(const sd_buf *b, uint64_t *ptr) {
    if (!b || !ptr) return SD_FAIL(SD_ERR_ARG, "sd_buf_ptr: NULL argument");
    *ptr = (uint64_t)(uintptr_t)b->base;
    return SD_OK;
}

extern "C" int sd_peer_ptr(const sd_buf *b, int32_t pe, uint64_t *ptr) {
    if (!b || !ptr) return SD_FAIL(SD_ERR_ARG, "sd_peer_ptr: NULL argument");
    if (pe < 0 || pe >= g_sd.npes)
        return SD_FAIL(SD_ERR_ARG, "sd_peer_ptr: PE %d of %d", pe, g_sd.npes);
    *ptr = (uint64_t)(uintptr_t)b->h_peers[pe];
    return SD_OK;
}

/* The plain memory entry points need no runtime, but once it is up they
 * work on its GPU, whichever thread calls (sd_use_device). */
static int sd_on_pe_device(void) { return g_sd.initialised ? sd_use_device(g_sd.device) : SD_OK; }

extern "C" int sd_dev_alloc(size_t bytes, uint64_t *ptr) {
    if (!ptr) return SD_FAIL(SD_ERR_ARG, "sd_dev_alloc: NULL argument");
    SD_TRY(sd_on_pe_device());
    void *p = NULL;
    SD_CUDA(cudaMalloc(&p, bytes ? bytes : 16));
    *ptr = (uint64_t)(uintptr_t)p;
    return SD_OK;
}

extern "C" int sd_dev_free(uint64_t ptr) {
    if (ptr) SD_CUDA(cudaFree((void *)(uintptr_t)ptr));
    return SD_OK;
}

/* The stream plain copies run on: the library's once it is up, so that they
 * are ordered with the collectives; the legacy default stream before. */
static cudaStream_t sd_copy_stream(void) { return g_sd.initialised ? g_sd.stream : 0; }

static int sd_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    if (!bytes) return SD_OK;
    SD_TRY(sd_on_pe_device());
    cudaStream_t s = sd_copy_stream();
    SD_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, s));
    SD_CUDA(cudaStreamSynchronize(s));
    return SD_OK;
}

extern "C" int sd_copy_htod(uint64_t dst, const void *src, size_t bytes) {
    return sd_copy((void *)(uintptr_t)dst, src, bytes, cudaMemcpyHostToDevice);
}

extern "C" int sd_copy_dtoh(void *dst, uint64_t src, size_t bytes) {
    return sd_copy(dst, (const void *)(uintptr_t)src, bytes, cudaMemcpyDeviceToHost);
}

extern "C" int sd_copy_dtod(uint64_t dst, uint64_t src, size_t bytes) {
    return sd_copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes,
                   cudaMemcpyDeviceToDevice);
}

extern "C" int sd_memset(uint64_t dst, int32_t value, size_t bytes) {
    if (!bytes) return SD_OK;
    SD_TRY(sd_on_pe_device());
    cudaStream_t s = sd_copy_stream();
    SD_CUDA(cudaMemsetAsync((void *)(uintptr_t)dst, value, bytes, s));
    SD_CUDA(cudaStreamSynchronize(s));
    return SD_OK;
}
