/*
 * sd_bench.cu: timings for benchmarks, measured with CUDA events on the
 * library's stream so that host overheads between calls do not count.
 */
#include "sd_internal.h"

/* Elapsed milliseconds between two events recorded around enqueue(iters). */
template <typename Enqueue>
static int sd_time(int32_t warmup, int32_t iters, float *ms, Enqueue enqueue) {
    if (!ms || iters < 1 || warmup < 0)
        return SD_FAIL(SD_ERR_ARG, "timing: iters %d, warmup %d", iters, warmup);
    for (int i = 0; i < warmup; i++) SD_TRY(enqueue());
    SD_TRY(sd_stream_wait((int64_t)g_sd.timeout_ns));
    cudaEvent_t start, stop;
    SD_CUDA(cudaEventCreate(&start));
    const cudaError_t ce = cudaEventCreate(&stop);
    if (ce != cudaSuccess) {
        cudaEventDestroy(start);
        return sd_fail_cuda(__FILE__, __LINE__, "cudaEventCreate(&stop)", ce);
    }
    int rc = SD_OK;
    cudaError_t e = cudaEventRecord(start, g_sd.stream);
    for (int i = 0; e == cudaSuccess && rc == SD_OK && i < iters; i++) rc = enqueue();
    if (e == cudaSuccess) e = cudaEventRecord(stop, g_sd.stream);
    if (e == cudaSuccess && rc == SD_OK) rc = sd_stream_wait((int64_t)g_sd.timeout_ns);
    if (e == cudaSuccess && rc == SD_OK) e = cudaEventElapsedTime(ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (e != cudaSuccess) return sd_fail_cuda(__FILE__, __LINE__, "timing events", e);
    return rc;
}

extern "C" int sd_time_allreduce(sd_buf *b, size_t n, int32_t dtype, int32_t op, int32_t algo,
                                 int32_t warmup, int32_t iters, float *ms) {
    SD_TRY(sd_require_joined("sd_time_allreduce"));
    /* Start together: the first timed collective should not absorb the peers' lag. */
    SD_TRY(sd_launch_barrier(g_sd.stream));
    return sd_time(warmup, iters, ms,
                   [&]() { return sd_allreduce_enqueue(b, 0, n, dtype, op, algo); });
}

extern "C" int sd_time_barrier(int32_t warmup, int32_t iters, float *ms) {
    SD_TRY(sd_require_joined("sd_time_barrier"));
    return sd_time(warmup, iters, ms, []() { return sd_launch_barrier(g_sd.stream); });
}

extern "C" int sd_time_copy(size_t bytes, int32_t warmup, int32_t iters, float *ms) {
    SD_TRY(sd_require_init("sd_time_copy"));
    void *src = NULL, *dst = NULL;
    SD_CUDA(cudaMalloc(&src, bytes));
    cudaError_t e = cudaMalloc(&dst, bytes);
    if (e != cudaSuccess) {
        cudaFree(src);
        return sd_fail_cuda(__FILE__, __LINE__, "cudaMalloc(copy destination)", e);
    }
    int rc = sd_time(warmup, iters, ms, [&]() {
        SD_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g_sd.stream));
        return (int)SD_OK;
    });
    cudaFree(src);
    cudaFree(dst);
    return rc;
}
