/*
 * sd_compute_ctx.cu: the compute context (streams, cuBLAS and cuBLASLt handles, workspace,
 * scratch), device and pinned memory, transfers, events and waiting, and CUDA
 * graph capture, whose step-reading kernels take each launch's values as
 * arguments (sd_step_node.cuh).
 *
 * Streams. All compute work of a context goes on one stream: the comm
 * runtime's (sd_stream) when the engine is built on the nvshmem comm, so that
 * collectives and compute are ordered without host synchronisation; batches
 * travel on a second, copy stream, ordered with the first by events.
 *
 * Devices. The CUDA runtime's current device is a property of the host
 * thread, and Go moves goroutines between threads: every entry point that
 * touches the device first makes the context's device current.
 */
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"
#include "sd_step_node.cuh"

/* The cuBLAS workspace: what cuBLAS recommends on Hopper. */
#define SDC_WORKSPACE_BYTES ((size_t)32 << 20)
/* The scratch of the deterministic reductions (partial sums). */
#define SDC_SCRATCH_BYTES ((size_t)16 << 20)

static cudaStream_t sdc_stream_of(const sdc_ctx *c, int32_t on_copy) {
    return (cudaStream_t)(uintptr_t)(on_copy ? c->copy_stream : c->stream);
}

extern "C" int sdc_abi_version(void) { return SDC_ABI_VERSION; }

/* Releases what sdc_create made; fields that are 0 were not made. */
static void sdc_release(sdc_ctx *c) {
    if (c->lt) cublasLtDestroy((cublasLtHandle_t)(uintptr_t)c->lt);
    if (c->blas) cublasDestroy((cublasHandle_t)(uintptr_t)c->blas);
    if (c->workspace) cudaFree((void *)(uintptr_t)c->workspace);
    if (c->scratch) cudaFree((void *)(uintptr_t)c->scratch);
    if (c->counters) cudaFree((void *)(uintptr_t)c->counters);
    if (c->step) cudaFree((void *)(uintptr_t)c->step);
    if (c->status) cudaFree((void *)(uintptr_t)c->status);
    if (c->result) cudaFree((void *)(uintptr_t)c->result);
    if (c->host_result) cudaFreeHost((void *)(uintptr_t)c->host_result);
    if (c->side_workspace) cudaFree((void *)(uintptr_t)c->side_workspace);
    if (c->fork_event) cudaEventDestroy((cudaEvent_t)(uintptr_t)c->fork_event);
    if (c->join_event) cudaEventDestroy((cudaEvent_t)(uintptr_t)c->join_event);
    if (c->side_stream) cudaStreamDestroy((cudaStream_t)(uintptr_t)c->side_stream);
    if (c->copy_stream) cudaStreamDestroy((cudaStream_t)(uintptr_t)c->copy_stream);
    if (c->owns_stream && c->stream) cudaStreamDestroy((cudaStream_t)(uintptr_t)c->stream);
    memset(c, 0, sizeof *c);
}

/* Allocates bytes of device memory into *field and zeroes it. */
static int sdc_alloc_field(uint64_t *field, size_t bytes) {
    void *p = NULL;
    SD_CUDA(cudaMalloc(&p, bytes));
    *field = (uint64_t)(uintptr_t)p;
    SD_CUDA(cudaMemset(p, 0, bytes));
    return SD_OK;
}

static int sdc_fill(uint64_t stream, int32_t device, sdc_ctx *c) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0) {
        (void)cudaGetLastError();
        return SD_FAIL(SD_ERR_NO_DEVICE, "sdc_create: no usable GPU (cudaGetDeviceCount: %s)",
                       e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    }
    /* A caller's stream belongs to device, or when it is -1 to the current
     * one; without a stream, device -1 is GPU 0. */
    int dev = device;
    if (dev < 0) {
        dev = 0;
        if (stream != 0) SD_CUDA(cudaGetDevice(&dev));
    }
    if (dev >= count) return SD_FAIL(SD_ERR_NO_DEVICE, "sdc_create: GPU %d asked for, %d visible", dev, count);
    SD_CUDA(cudaSetDevice(dev));
    if (stream != 0) {
        c->stream = stream;
    } else {
        cudaStream_t s;
        SD_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        c->stream = (uint64_t)(uintptr_t)s;
        c->owns_stream = 1;
    }
    c->device = dev;
    SD_CUDA(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, dev));
    cudaStream_t cs;
    SD_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    c->copy_stream = (uint64_t)(uintptr_t)cs;

    SD_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    c->side_stream = (uint64_t)(uintptr_t)cs;
    cudaEvent_t ev;
    SD_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    c->fork_event = (uint64_t)(uintptr_t)ev;
    SD_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    c->join_event = (uint64_t)(uintptr_t)ev;

    SD_TRY(sdc_alloc_field(&c->workspace, SDC_WORKSPACE_BYTES));
    SD_TRY(sdc_alloc_field(&c->side_workspace, SDC_WORKSPACE_BYTES));
    c->workspace_bytes = (int64_t)SDC_WORKSPACE_BYTES;
    SD_TRY(sdc_alloc_field(&c->scratch, SDC_SCRATCH_BYTES));
    c->scratch_bytes = (int64_t)SDC_SCRATCH_BYTES;
    SD_TRY(sdc_alloc_field(&c->counters, SDC_COUNTERS * sizeof(uint32_t)));
    SD_TRY(sdc_alloc_field(&c->step, sizeof(sdc_step)));
    SD_TRY(sdc_alloc_field(&c->status, SDC_STATUS_WORDS * sizeof(float)));
    SD_TRY(sdc_alloc_field(&c->result, 4 * sizeof(double)));
    void *hr = NULL;
    SD_CUDA(cudaHostAlloc(&hr, 4 * sizeof(double), cudaHostAllocDefault));
    c->host_result = (uint64_t)(uintptr_t)hr;

    cublasHandle_t h;
    cublasStatus_t st = cublasCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS)
        return SD_FAIL(SD_ERR, "cublasCreate: %s", cublasGetStatusString(st));
    c->blas = (uint64_t)(uintptr_t)h;
    /* cublasSetStream resets the workspace to the default pool: set it first. */
    st = cublasSetStream(h, (cudaStream_t)(uintptr_t)c->stream);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasSetWorkspace(h, (void *)(uintptr_t)c->workspace, SDC_WORKSPACE_BYTES);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
    if (st != CUBLAS_STATUS_SUCCESS)
        return SD_FAIL(SD_ERR, "cuBLAS handle set-up: %s", cublasGetStatusString(st));
    /* cuBLASLt for the fused GEMMs (sd_compute_lt.cu); without it (lt = 0)
     * every plan fails and the layers keep their unfused path. */
    cublasLtHandle_t lt = NULL;
    if (cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS) c->lt = (uint64_t)(uintptr_t)lt;
    SD_CUDA(cudaDeviceSynchronize()); /* the memsets are done before any stream uses the memory */
    return SD_OK;
}

extern "C" int sdc_create(uint64_t stream, int32_t device, sdc_ctx *out) {
    if (!out) return SD_FAIL(SD_ERR_ARG, "sdc_create: NULL context");
    memset(out, 0, sizeof *out);
    int rc = sdc_fill(stream, device, out);
    if (rc != SD_OK) sdc_release(out);
    return rc;
}

extern "C" int sdc_destroy(sdc_ctx *c) {
    if (!c) return SD_FAIL(SD_ERR_ARG, "sdc_destroy: NULL context");
    if (!c->stream) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    cudaError_t e1 = cudaStreamSynchronize((cudaStream_t)(uintptr_t)c->stream);
    cudaError_t e2 = cudaStreamSynchronize((cudaStream_t)(uintptr_t)c->copy_stream);
    if (c->side_stream) (void)cudaStreamSynchronize((cudaStream_t)(uintptr_t)c->side_stream);
    sdc_release(c);
    if (e1 != cudaSuccess) return sd_fail_cuda(__FILE__, __LINE__, "cudaStreamSynchronize(stream)", e1);
    if (e2 != cudaSuccess) return sd_fail_cuda(__FILE__, __LINE__, "cudaStreamSynchronize(copy)", e2);
    return SD_OK;
}

extern "C" int sdc_device_name(int32_t device, char *name, size_t cap) {
    if (!name || cap == 0) return SD_FAIL(SD_ERR_ARG, "sdc_device_name: no room");
    cudaDeviceProp p;
    SD_CUDA(cudaGetDeviceProperties(&p, device));
    const size_t n = strnlen(p.name, cap - 1);
    memcpy(name, p.name, n);
    name[n] = 0;
    return SD_OK;
}

/* ---- memory and transfers ---- */

/* The compute ABI's names for the comm ABI's plain device memory (sd_memory.cu). */
extern "C" int sdc_dev_alloc(size_t bytes, uint64_t *ptr) { return sd_dev_alloc(bytes, ptr); }

extern "C" int sdc_dev_free(uint64_t ptr) { return sd_dev_free(ptr); }

extern "C" int sdc_host_alloc(size_t bytes, void **ptr) {
    if (!ptr) return SD_FAIL(SD_ERR_ARG, "sdc_host_alloc: NULL argument");
    *ptr = NULL;
    SD_CUDA(cudaHostAlloc(ptr, bytes ? bytes : 16, cudaHostAllocDefault));
    return SD_OK;
}

extern "C" int sdc_host_free(void *ptr) {
    if (ptr) SD_CUDA(cudaFreeHost(ptr));
    return SD_OK;
}

extern "C" int sdc_zero(const sdc_ctx *c, uint64_t dst, size_t bytes) {
    if (!bytes) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    SD_CUDA(cudaMemsetAsync((void *)(uintptr_t)dst, 0, bytes, sdc_stream_of(c, 0)));
    return SD_OK;
}

extern "C" int sdc_copy(const sdc_ctx *c, uint64_t dst, uint64_t src, size_t bytes) {
    if (!bytes || dst == src) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    SD_CUDA(cudaMemcpyAsync((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes,
                            cudaMemcpyDeviceToDevice, sdc_stream_of(c, 0)));
    return SD_OK;
}

extern "C" int sdc_htod(const sdc_ctx *c, int32_t on_copy, uint64_t dst, const void *src,
                        size_t bytes) {
    if (!bytes) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    SD_CUDA(cudaMemcpyAsync((void *)(uintptr_t)dst, src, bytes, cudaMemcpyHostToDevice,
                            sdc_stream_of(c, on_copy)));
    return SD_OK;
}

extern "C" int sdc_dtoh(const sdc_ctx *c, int32_t on_copy, void *dst, uint64_t src, size_t bytes) {
    if (!bytes) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    SD_CUDA(cudaMemcpyAsync(dst, (const void *)(uintptr_t)src, bytes, cudaMemcpyDeviceToHost,
                            sdc_stream_of(c, on_copy)));
    return SD_OK;
}

/* Word copy into host memory by the device (one block; reports are a few
 * words): src's words, then src2's. No fence: the host reads them only after
 * waiting for an event recorded after the kernel, and the kernel's end makes
 * its writes visible to that wait. On the H200 the small MLP's report took
 * 3.3-3.6 us of its step as two kernels with a __threadfence_system each,
 * 1.3-2.0 us as this one (ddp's BenchmarkMLPStepGPU; the two changes were not
 * timed apart), and 0.7-1.2 us once launched with programmatic dependent
 * launch, its launch overlapping the update kernel's end. */
__global__ void sdc_store_host_kernel(uint32_t *dst, const uint32_t *__restrict__ src, size_t words,
                                      const uint32_t *__restrict__ src2, size_t words2) {
    sdc_wait_prior_grid();
    for (size_t i = threadIdx.x; i < words + words2; i += blockDim.x) dst[i] = i < words ? src[i] : src2[i - words];
}

extern "C" int sdc_store_host(const sdc_ctx *c, void *dst, uint64_t src, size_t bytes, uint64_t src2,
                              size_t bytes2) {
    if (!bytes && !bytes2) return SD_OK;
    if (!dst || (bytes && !src) || (bytes2 && !src2) || bytes % 4 || bytes2 % 4 || (uintptr_t)dst % 4 || src % 4 ||
        src2 % 4)
        return SD_FAIL(SD_ERR_ARG,
                       "sdc_store_host: NULL or unaligned pointer, or %zu and %zu bytes (want multiples of 4)", bytes,
                       bytes2);
    SD_TRY(sdc_use_device(c->device));
    const size_t words = bytes / 4 + bytes2 / 4;
    const unsigned threads = words < 256 ? (unsigned)((words + 31) / 32 * 32) : 256u;
    SD_CUDA(sdc_launch(sdc_store_host_kernel, dim3(1), dim3(threads), sdc_stream_of(c, 0), (uint32_t *)dst,
                       (const uint32_t *)(uintptr_t)src, bytes / 4, (const uint32_t *)(uintptr_t)src2, bytes2 / 4));
    return SD_OK;
}

/* ---- ordering and waiting ---- */

extern "C" int sdc_event_create(uint64_t *event) {
    if (!event) return SD_FAIL(SD_ERR_ARG, "sdc_event_create: NULL argument");
    cudaEvent_t ev;
    SD_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    *event = (uint64_t)(uintptr_t)ev;
    return SD_OK;
}

extern "C" int sdc_event_destroy(uint64_t event) { return sd_event_destroy(event); }

extern "C" int sdc_event_record(const sdc_ctx *c, int32_t on_copy, uint64_t event) {
    SD_TRY(sdc_use_device(c->device));
    SD_CUDA(cudaEventRecord((cudaEvent_t)(uintptr_t)event, sdc_stream_of(c, on_copy)));
    return SD_OK;
}

extern "C" int sdc_wait_event(const sdc_ctx *c, int32_t on_copy, uint64_t event) {
    SD_TRY(sdc_use_device(c->device));
    SD_CUDA(cudaStreamWaitEvent(sdc_stream_of(c, on_copy), (cudaEvent_t)(uintptr_t)event, 0));
    return SD_OK;
}

extern "C" int sdc_event_sync(uint64_t event, int64_t timeout_ns) {
    if (!event) return SD_FAIL(SD_ERR_ARG, "sdc_event_sync: no event");
    if (g_sd.initialised) return sd_event_wait(event, timeout_ns);
    SD_CUDA(cudaEventSynchronize((cudaEvent_t)(uintptr_t)event));
    return SD_OK;
}

extern "C" int sdc_sync(const sdc_ctx *c, int64_t timeout_ns) {
    SD_TRY(sdc_use_device(c->device));
    cudaStream_t s = sdc_stream_of(c, 0);
    if (g_sd.initialised && s == g_sd.stream) return sd_stream_wait(timeout_ns);
    SD_CUDA(cudaStreamSynchronize(s));
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/* ---- step block and CUDA graphs ---- */

/* Copies the step's values (a kernel argument, copied at launch) into the block. */
__global__ void sdc_write_step_kernel(sdc_step values, sdc_step *block) { *block = values; }

extern "C" int sdc_set_step(const sdc_ctx *c, const sdc_step *values) {
    if (!values) return SD_FAIL(SD_ERR_ARG, "sdc_set_step: NULL values");
    SD_TRY(sdc_use_device(c->device));
    sdc_write_step_kernel<<<1, 1, 0, sdc_stream_of(c, 0)>>>(*values,
                                                            (sdc_step *)(uintptr_t)c->step);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

extern "C" int sdc_capture_begin(const sdc_ctx *c) {
    SD_TRY(sdc_use_device(c->device));
    SD_CUDA(cudaStreamBeginCapture(sdc_stream_of(c, 0), cudaStreamCaptureModeThreadLocal));
    return SD_OK;
}

/*
 * A captured step: the executable graph, the graph it came from (whose node
 * handles the executable's nodes are updated through) and the nodes that
 * read the step block (sd_step_node.cuh). The ABI's exec handle points to
 * it.
 */
struct sdc_graph {
    cudaGraphExec_t exec;
    cudaGraph_t graph;
    int nodes;
    sdc_step_node *node;
};

static void sdc_graph_free(sdc_graph *x) {
    if (!x) return;
    if (x->exec) cudaGraphExecDestroy(x->exec);
    if (x->graph) cudaGraphDestroy(x->graph);
    free(x->node);
    free(x);
}

/* Finds g's kernel nodes that read the step block. */
static int sdc_graph_step_nodes(sdc_graph *x) {
    size_t n = 0;
    SD_CUDA(cudaGraphGetNodes(x->graph, NULL, &n));
    if (n == 0) return SD_OK;
    cudaGraphNode_t *all = (cudaGraphNode_t *)calloc(n, sizeof *all);
    x->node = (sdc_step_node *)calloc(n, sizeof *x->node);
    if (!all || !x->node) {
        free(all);
        return SD_FAIL(SD_ERR_NO_MEMORY, "sdc_capture_end: out of host memory for %zu nodes", n);
    }
    int rc = SD_OK;
    cudaError_t e = cudaGraphGetNodes(x->graph, all, &n);
    if (e != cudaSuccess) rc = sd_fail_cuda(__FILE__, __LINE__, "cudaGraphGetNodes", e);
    for (size_t i = 0; rc == SD_OK && i < n; i++) {
        cudaGraphNodeType t;
        e = cudaGraphNodeGetType(all[i], &t);
        if (e != cudaSuccess) {
            rc = sd_fail_cuda(__FILE__, __LINE__, "cudaGraphNodeGetType", e);
            break;
        }
        if (t != cudaGraphNodeTypeKernel) continue;
        cudaKernelNodeParams p = {};
        e = cudaGraphKernelNodeGetParams(all[i], &p);
        if (e != cudaSuccess) {
            /* cuBLAS(Lt) kernels may be driver-API nodes the runtime call
             * does not describe: not ours, so not the step's. */
            (void)cudaGetLastError();
            continue;
        }
        sdc_step_node *sn = &x->node[x->nodes];
        if (sdc_xent_step_node(&p, sn) || sdc_update_step_node(&p, sn)) {
            sn->node = all[i];
            x->nodes++;
        }
    }
    free(all);
    return rc;
}

extern "C" int sdc_capture_end(const sdc_ctx *c, uint64_t *exec) {
    if (!exec) return SD_FAIL(SD_ERR_ARG, "sdc_capture_end: NULL argument");
    *exec = 0;
    SD_TRY(sdc_use_device(c->device));
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(sdc_stream_of(c, 0), &g);
    if (e != cudaSuccess || !g) {
        if (g) cudaGraphDestroy(g);
        (void)cudaGetLastError(); /* an invalidated capture leaves its error behind */
        return sd_fail_cuda(__FILE__, __LINE__, "cudaStreamEndCapture",
                            e != cudaSuccess ? e : cudaErrorStreamCaptureInvalidated);
    }
    sdc_graph *x = (sdc_graph *)calloc(1, sizeof *x);
    if (!x) {
        cudaGraphDestroy(g);
        return SD_FAIL(SD_ERR_NO_MEMORY, "sdc_capture_end: out of host memory");
    }
    x->graph = g;
    e = cudaGraphInstantiateWithFlags(&x->exec, g, 0);
    if (e != cudaSuccess) {
        x->exec = NULL;
        sdc_graph_free(x);
        return sd_fail_cuda(__FILE__, __LINE__, "cudaGraphInstantiateWithFlags", e);
    }
    const int rc = sdc_graph_step_nodes(x);
    if (rc != SD_OK) {
        sdc_graph_free(x);
        return rc;
    }
    *exec = (uint64_t)(uintptr_t)x;
    return SD_OK;
}

extern "C" int sdc_capturing(const sdc_ctx *c, int32_t *capturing) {
    if (!capturing) return SD_FAIL(SD_ERR_ARG, "sdc_capturing: NULL argument");
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    SD_CUDA(cudaStreamIsCapturing(sdc_stream_of(c, 0), &st));
    *capturing = st != cudaStreamCaptureStatusNone;
    return SD_OK;
}

extern "C" int sdc_graph_launch(const sdc_ctx *c, uint64_t exec, const sdc_step *values) {
    sdc_graph *x = (sdc_graph *)(uintptr_t)exec;
    if (!x || !x->exec) return SD_FAIL(SD_ERR_ARG, "sdc_graph_launch: no graph");
    if (!values) return SD_FAIL(SD_ERR_ARG, "sdc_graph_launch: NULL values");
    SD_TRY(sdc_use_device(c->device));
    /* The step block stays as the last eager step or launch left it; the
     * graph's readers of it take this launch's values as arguments. */
    for (int i = 0; i < x->nodes; i++) {
        sdc_step_node *n = &x->node[i];
        n->set_values(n, values);
        SD_CUDA(cudaGraphExecKernelNodeSetParams(x->exec, n->node, &n->p));
    }
    SD_CUDA(cudaGraphLaunch(x->exec, sdc_stream_of(c, 0)));
    return SD_OK;
}

extern "C" int sdc_graph_destroy(uint64_t exec) {
    sdc_graph_free((sdc_graph *)(uintptr_t)exec);
    return SD_OK;
}

extern "C" int sdc_side_fork(const sdc_ctx *c) {
    if (!c || !c->side_stream) return SD_FAIL(SD_ERR_ARG, "sdc_side_fork: no context");
    SD_CUDA(cudaEventRecord((cudaEvent_t)(uintptr_t)c->fork_event, sdc_stream_of(c, 0)));
    SD_CUDA(cudaStreamWaitEvent((cudaStream_t)(uintptr_t)c->side_stream, (cudaEvent_t)(uintptr_t)c->fork_event, 0));
    return SD_OK;
}

extern "C" int sdc_side_join(const sdc_ctx *c) {
    if (!c || !c->side_stream) return SD_FAIL(SD_ERR_ARG, "sdc_side_join: no context");
    SD_CUDA(cudaEventRecord((cudaEvent_t)(uintptr_t)c->join_event, (cudaStream_t)(uintptr_t)c->side_stream));
    SD_CUDA(cudaStreamWaitEvent(sdc_stream_of(c, 0), (cudaEvent_t)(uintptr_t)c->join_event, 0));
    return SD_OK;
}
