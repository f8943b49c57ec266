/*
 * symddp_compute.h: the compute half of the C ABI of libsymddp_cuda.so: the
 * arithmetic of compute.Engine on device memory (cuBLAS GEMM and the
 * project's fused kernels), the optimizer updates over a whole arena, batch
 * transfers through pinned host memory, and CUDA graph capture of a step.
 *
 * The same conventions as symddp_cuda.h:
 *   - plain C types only, so cgo can include the header without CUDA;
 *   - every entry point returns an int status, SD_OK (0) or an SD_ERR_* code,
 *     and stores a message that sd_last_error() returns on the same thread;
 *   - device addresses, streams, events, handles and graphs travel as uint64_t;
 *   - sizes are in bytes when the name says bytes, in elements otherwise.
 *
 * Every function that launches work enqueues it on the context's stream (or its
 * copy stream where it says so) and returns at once, except the few that say
 * they wait. All reductions are deterministic: a fixed order of addition that
 * depends only on the shapes, never float atomics, so every run and every PE
 * gets the same bits.
 *
 * Values that change from step to step (the loss-gradient scale, the
 * optimizer's learning rate and bias corrections) are taken by value in eager
 * use. Kernels recorded into a CUDA graph were recorded reading them from the
 * context's step block (sdc_step in device memory; pass use_block = 1 while
 * capturing); sdc_graph_launch gives those kernels' nodes the launch's values
 * as arguments instead, so no kernel writes the block before the graph runs
 * (sd_step_node.cuh). sdc_set_step still writes the block, for eager kernels
 * that were enqueued reading it.
 */
#ifndef SYMDDP_COMPUTE_H
#define SYMDDP_COMPUTE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SDC_ABI_VERSION changes whenever a signature or a struct below changes. */
#define SDC_ABI_VERSION 25

/* Activations (the numbers match compute.Activation). */
enum { SDC_IDENTITY = 0, SDC_RELU = 1 };

/*
 * Names for what an integer argument means, so that a reader (and the Go
 * bindings, which internal/cudalib/gen generates from this header) can tell
 * them from sizes and device addresses. They are the plain types underneath,
 * so the ABI is that of int32_t and uint64_t. Otherwise uint64_t is a device
 * address, int64_t, int32_t and size_t a count, and an int64_t whose name
 * ends in _ns a duration in nanoseconds.
 */
typedef int32_t sdc_flag;    /* 0 or 1 */
typedef int32_t sdc_act;     /* SDC_IDENTITY or SDC_RELU */
typedef uint64_t sdc_handle; /* an event, graph or plan: not a device address */
typedef int32_t sdc_dtype;   /* a tensor's element type: SDC_F32 or SDC_BF16 */
typedef int32_t sdc_attn;    /* the kernels of a bf16 attention call: SDC_ATTN_* */

/*
 * Element types (the numbers of symddp_cuda.h's SD_F32 and SD_BF16). An
 * operation with kernels for both takes the dtype and picks the kernel. Its
 * bf16 kernels read and write bf16 tensors (__nv_bfloat16) with fp32
 * accumulation: their pointers must be 16-byte aligned and rows a multiple
 * of 8 elements (16-byte vector loads of 8 bf16); every value they store in
 * bf16 is rounded to nearest even. Where the bf16 kernel does other
 * arithmetic than the fp32 one (it fuses more, or does not follow the CPU
 * engine's order), the declaration says so.
 */
enum { SDC_F32 = 1, SDC_BF16 = 2 };

/* Optimizer kinds (optim.Hyper.Kind). */
enum { SDC_SGD = 1, SDC_ADAM = 2, SDC_ADAMW = 3 };

/* Words of the update status (device float[SDC_STATUS_WORDS], sdc_ctx.status). */
enum {
    SDC_STATUS_SKIPPED = 0, /* 1: the last update was skipped (non-finite gradients, or halted) */
    SDC_STATUS_SCALE = 1,   /* the clip factor the last update applied (1: not clipped) */
    SDC_STATUS_NORM = 2,    /* the global gradient norm of the last update, as float */
    SDC_STATUS_HALTED = 3,  /* 1: a non-finite step with halt_on_skip set; every later update skips */
    SDC_STATUS_WORDS = 4
};

/* Counters the deterministic reductions use (sdc_ctx.counters, uint32). */
#define SDC_COUNTERS 65600

/*
 * A compute context: one stream for all compute work, a copy stream for
 * batches, a cuBLAS handle bound to the stream with its own workspace (so
 * capture never allocates; cuBLASLt's fused GEMMs share it, on the same
 * stream), a cuBLASLt handle, and the device scratch of the reductions. The
 * caller owns the struct; sdc_create fills it, sdc_destroy releases what it
 * holds. Fields are read-only for the caller.
 */
typedef struct {
    uint64_t stream;      /* cudaStream_t of all compute work */
    uint64_t copy_stream; /* cudaStream_t of batch copies */
    uint64_t blas;        /* cublasHandle_t bound to stream, default math (no TF32) */
    uint64_t workspace;   /* device: the cuBLAS workspace */
    uint64_t scratch;     /* device: partial sums of the reductions */
    uint64_t counters;    /* device: uint32[SDC_COUNTERS], zero between kernels */
    uint64_t step;        /* device: sdc_step, read by captured kernels */
    uint64_t status;      /* device: float[SDC_STATUS_WORDS], the last update's verdict */
    uint64_t result;      /* device: double[4], results the host reads back */
    uint64_t host_result; /* pinned host: double[4], where they are read back to */
    uint64_t lt;          /* cublasLtHandle_t (0: cuBLASLt unavailable, no fused GEMMs) */
    int64_t workspace_bytes;
    int64_t scratch_bytes;
    int32_t device;      /* the CUDA device */
    int32_t owns_stream; /* 1: sdc_create made the stream and sdc_destroy destroys it */
    int32_t sm_count;    /* multiprocessors of the device */
    int32_t pad;
    /* A side stream for GEMMs that may run beside the stream's (sdc_side_fork,
     * sdc_lt_matmul with side = 1), with a workspace of its own, and the two
     * events that fork it from and join it to the stream. */
    uint64_t side_stream;
    uint64_t side_workspace; /* device, workspace_bytes */
    uint64_t fork_event, join_event;
} sdc_ctx;

/* The values of one training step that captured kernels read at run time. */
typedef struct {
    float loss_scale; /* SoftmaxCrossEntropy: dlogits are scaled by it */
    float lr;         /* optimizer: the step's learning rate */
    float step_size;  /* Adam, AdamW: float32(lr / (1 - beta1^t)) */
    float bc2_sqrt;   /* Adam, AdamW: float32(sqrt(1 - beta2^t)) */
    float decay;      /* AdamW: float32(1 - lr*wd); 1 otherwise */
    int32_t first;    /* 1 at optimizer step 1: the state starts from zero */
    int32_t pad[2];
} sdc_step;

/* An optimizer's fixed hyperparameters (optim.Hyper), for sdc_update. */
typedef struct {
    int32_t kind;       /* SDC_SGD, SDC_ADAM or SDC_ADAMW */
    int32_t nesterov;   /* SGD: Nesterov momentum */
    float momentum;     /* SGD: mu (0: none) */
    float weight_decay; /* SGD and Adam: L2 added to the gradient (AdamW: use sdc_step.decay) */
    float beta1, beta2; /* Adam, AdamW */
    float eps;          /* Adam, AdamW */
    float c1, c2;       /* Adam, AdamW: 1 - beta1 and 1 - beta2, rounded to float32 */
    float max_norm;     /* > 0: clip the global gradient norm to it (optim.ClipFactor) */
    int32_t halt_on_skip; /* 1: after a skipped (non-finite) step, skip every later one */
    int32_t pad;
} sdc_optim;

/* ---- context ---- */

/* SDC_ABI_VERSION of the built library. */
int sdc_abi_version(void);
/*
 * Makes a context on device: when stream is 0 the context makes its own
 * stream there (device -1: GPU 0); otherwise the work goes on stream, which
 * must belong to device (-1: the current device), e.g. sd_stream's on the
 * GPU sd_init chose. Allocates the workspace and scratch.
 */
int sdc_create(uint64_t stream, int32_t device, sdc_ctx *out);
/* Waits for the context's streams and releases what sdc_create made. */
int sdc_destroy(sdc_ctx *c);
/* The device's name into name[cap] (for logs). */
int sdc_device_name(int32_t device, char *name, size_t cap);

/* ---- memory and transfers ---- */

/* cudaMalloc (not managed memory) and cudaFree. */
int sdc_dev_alloc(size_t bytes, uint64_t *ptr);
int sdc_dev_free(uint64_t ptr);
/* Pinned host memory (cudaHostAlloc) and its release. */
int sdc_host_alloc(size_t bytes, void **ptr);
int sdc_host_free(void *ptr);
/* cudaMemsetAsync(dst, 0, bytes) on the stream. */
int sdc_zero(const sdc_ctx *c, uint64_t dst, size_t bytes);
/* Device-to-device copy on the stream. */
int sdc_copy(const sdc_ctx *c, uint64_t dst, uint64_t src, size_t bytes);
/*
 * Host-to-device and device-to-host copies on the stream (on_copy = 0) or the
 * copy stream (on_copy = 1); host memory should be pinned for them to be
 * asynchronous. They return at once.
 */
int sdc_htod(const sdc_ctx *c, sdc_flag on_copy, uint64_t dst, const void *src, size_t bytes);
int sdc_dtoh(const sdc_ctx *c, sdc_flag on_copy, void *dst, uint64_t src, size_t bytes);
/*
 * Device-to-host copy by a kernel on the stream: the device writes bytes (a
 * multiple of 4) from src, then bytes2 (0 or a multiple of 4) from src2, into
 * pinned host memory dst (sdc_host_alloc's, reachable from the device at its
 * host address under unified addressing), back to back. No copy engine: one
 * small kernel, cheap inside a CUDA graph, for reports of a few words from
 * two places. The host sees the bytes once it has waited for an event
 * recorded after the kernel.
 */
int sdc_store_host(const sdc_ctx *c, void *dst, uint64_t src, size_t bytes, uint64_t src2, size_t bytes2);

/* ---- ordering and waiting ---- */

/* A CUDA event without timing. */
int sdc_event_create(sdc_handle *event);
int sdc_event_destroy(sdc_handle event);
/* Records event on the stream (on_copy = 0) or the copy stream (on_copy = 1). */
int sdc_event_record(const sdc_ctx *c, sdc_flag on_copy, sdc_handle event);
/* Makes the stream (on_copy = 0) or the copy stream (1) wait for event. */
int sdc_wait_event(const sdc_ctx *c, sdc_flag on_copy, sdc_handle event);
/*
 * The host waits for event. When the comm runtime is up this is sd_event_wait
 * (deadline timeout_ns, and the report of a collective that gave up).
 */
int sdc_event_sync(sdc_handle event, int64_t timeout_ns);
/* The host waits for everything enqueued on the stream so far (likewise). */
int sdc_sync(const sdc_ctx *c, int64_t timeout_ns);

/* ---- GEMM ---- */

/*
 * Row-major C (m,n) = alpha * op(A) (m,k) * op(B) (k,n) + beta * C, where
 * op(X) is X or its transpose (trans_x = 1), lda, ldb and ldc are the row
 * lengths of A, B and C as stored. cublasSgemm with the operands swapped
 * (C^T = op(B)^T op(A)^T in column-major), default math: fp32, no TF32.
 */
int sdc_gemm(const sdc_ctx *c, sdc_flag trans_a, sdc_flag trans_b, int64_t m, int64_t n, int64_t k,
             float alpha, uint64_t a, int64_t lda, uint64_t b, int64_t ldb, float beta,
             uint64_t cmat, int64_t ldc);
/*
 * sdc_gemm over batch matrices: product i reads A at a + i * stride_a, B at
 * b + i * stride_b and writes C at cmat + i * stride_c (strides in
 * elements). cublasSgemmStridedBatched, default math: fp32, no TF32.
 */
int sdc_gemm_batched(const sdc_ctx *c, sdc_flag trans_a, sdc_flag trans_b, int64_t m, int64_t n, int64_t k,
                     float alpha, uint64_t a, int64_t lda, int64_t stride_a, uint64_t b, int64_t ldb,
                     int64_t stride_b, float beta, uint64_t cmat, int64_t ldc, int64_t stride_c, int64_t batch);

/* ---- fused GEMMs (cuBLASLt epilogues) ---- */

/*
 * Epilogues of a planned GEMM, named in the row-major terms of sdc_gemm: the
 * product P (m,n) = op(A) (m,k) * op(B) (k,n), then
 *   SDC_EPI_NONE           C = P
 *   SDC_EPI_BIAS           C = P + bias[col]                 (bias: n floats, read)
 *   SDC_EPI_BIAS_RELU      C = relu(P + bias[col])
 *   SDC_EPI_BIAS_RELU_AUX  C = relu(P + bias[col]), and the ReLU bit-mask of C
 *                          into aux (a Linear layer's forward; the mask is what
 *                          SDC_EPI_DRELU_BGRAD of the next layer's input
 *                          gradient reads)
 *   SDC_EPI_DRELU_BGRAD    C = P where the mask in aux is set, 0 elsewhere (the
 *                          ReLU derivative: 0 where the forward's input was
 *                          <= 0), and bias[col] = column sums of C (n floats,
 *                          written)
 *   SDC_EPI_BGRAD_A        C = P, and bias (m floats, written) = row sums of
 *                          op(A) (m,k): the bias gradient dy^T 1 when op(A) is
 *                          dy^T, in the weight-gradient GEMM dW = dy^T x
 * The mask is cuBLASLt's: column-major over C^T (n rows, m columns), aux_ld bits
 * per column (a multiple of 128, at least n), so aux_ld / 8 * m bytes.
 */
enum {
    SDC_EPI_NONE = 0,
    SDC_EPI_BIAS = 1,
    SDC_EPI_BIAS_RELU = 2,
    SDC_EPI_BIAS_RELU_AUX = 3,
    SDC_EPI_DRELU_BGRAD = 4,
    SDC_EPI_BGRAD_A = 5
};

/* What a plan is made for (sdc_lt_plan_create). */
typedef struct {
    int32_t epilogue; /* SDC_EPI_* */
    int32_t trans_a;  /* 1: op(A) = A^T */
    int32_t trans_b;  /* 1: op(B) = B^T */
    int32_t pad;
    int64_t m, n, k;       /* row-major C (m,n) = op(A) (m,k) * op(B) (k,n) */
    int64_t lda, ldb, ldc; /* row lengths of A, B, C as stored */
    uint64_t bias;         /* device: the epilogue's bias or bias gradient (0 when none) */
    uint64_t aux;          /* device: the ReLU mask (BIAS_RELU_AUX, DRELU_BGRAD; else 0) */
    int64_t aux_ld;        /* bits per column of the mask */
    /* The smallest alignment in bytes (power of two, at most 256) that the
     * A, B and C addresses of every sdc_lt_matmul with the plan will have. */
    int32_t align_a, align_b, align_c;
    int32_t pad2;
} sdc_lt_args;

/*
 * Plans a GEMM with a fused epilogue on cuBLASLt at build time: descriptors,
 * layouts, fp32 compute without TF32 (CUBLAS_COMPUTE_32F) and the algorithm
 * cublasLtMatmulAlgoGetHeuristic picks for the context's workspace, once.
 * *plan is an opaque handle. Fails (SD_ERR, with cuBLASLt's reason, or
 * "no algorithm") when cuBLASLt cannot run the configuration on this GPU:
 * the caller then keeps its unfused path (sdc_gemm and the kernels below).
 * Unless SYMDDP_CUDA_TUNE=0, it times the heuristic's candidates on
 * scratch operands (allocated and freed here, synchronising the stream) and
 * keeps the fastest; call it at build time, never while capturing.
 */
int sdc_lt_plan_create(const sdc_ctx *c, const sdc_lt_args *args, sdc_handle *plan);
int sdc_lt_plan_destroy(sdc_handle plan);
/*
 * Enqueues the planned GEMM on the stream (side = 0) or the side stream (1)
 * with operands a, b and output c (alpha 1, beta 0; the plan's bias and aux). The addresses must have the
 * plan's alignments. Uses the context's workspace; allocates nothing and
 * can be captured in a CUDA graph.
 */
int sdc_lt_matmul(const sdc_ctx *c, sdc_handle plan, uint64_t a, uint64_t b, uint64_t cmat,
                  sdc_flag side);
/*
 * Orders the side stream after everything enqueued on the stream so far
 * (fork), and the stream after everything enqueued on the side stream so far
 * (join): the GEMMs between a fork and a join with side = 1 run beside the
 * stream's. Both can be captured in a CUDA graph (the side stream joins the
 * capture at the fork and must be joined back before it ends).
 */
int sdc_side_fork(const sdc_ctx *c);
int sdc_side_join(const sdc_ctx *c);

/* ---- bf16 GEMMs on cuBLASLt (sd_compute_lt.cu: the bf16 Linear's plans) ---- */

/*
 * Row-major C (m,n) = op(A) (m,k) op(B) (k,n) [+ C when accumulate], A and B
 * bf16, fp32 accumulation, C bf16 or fp32 (c_type). trans_a: A is stored (k,m);
 * trans_b: B is stored (n,k) (a Linear's weight (OC,C): y = x W^T is trans_b = 1).
 * batch > 1: strided batches (strides in elements), epilogue NONE only.
 * Epilogues (bias vectors have n entries, one per column of C, type bias_type):
 *   BIAS           C = AB + bias
 *   GELU_BIAS      C = gelu(AB + bias)
 *   GELU_AUX_BIAS  C = gelu(AB + bias), aux (m,n) bf16 = AB + bias (pre-activation)
 *   DGELU          C = (AB) * gelu'(aux), aux the forward's pre-activation
 *   DGELU_BGRAD    as DGELU, and bias = column sums of C (over the m rows)
 *   BGRAD_A        bias (m entries!) = row sums of op(A) over k: with A = dout^T
 *                  (trans_a, dout (tokens,OC)) and B = x, C = dW and bias = db.
 * The bias gradient is written, not added to. The plan (descriptors, layouts
 * and the heuristic's algorithm for workspace_bytes) is made once on the
 * context's cuBLASLt handle; sdc_bf16_gemm_run sets the pointers and enqueues
 * cublasLtMatmul on the context's stream (so a plan is not for two threads at
 * once). Every pointer 16-byte aligned.
 */
enum {
    SDC_BEPI_NONE = 0,
    SDC_BEPI_BIAS = 1,
    SDC_BEPI_GELU_BIAS = 2,
    SDC_BEPI_GELU_AUX_BIAS = 3,
    SDC_BEPI_DGELU = 4,
    SDC_BEPI_DGELU_BGRAD = 5,
    SDC_BEPI_BGRAD_A = 6
};
typedef struct {
    int32_t m, n, k;
    int32_t trans_a, trans_b;
    int32_t batch;                        /* 1: one GEMM */
    int64_t stride_a, stride_b, stride_c; /* elements between batches */
    int32_t c_type;                       /* SDC_BF16 or SDC_F32 */
    int32_t bias_type;                    /* SDC_BF16 or SDC_F32 */
    int32_t epilogue;                     /* SDC_BEPI_* */
    int32_t accumulate;                   /* 1: C += op(A) op(B) (beta = 1) */
    int64_t workspace_bytes;              /* what sdc_bf16_gemm_run will be given */
} sdc_bf16_gemm_desc;
int sdc_bf16_gemm_create(const sdc_ctx *c, const sdc_bf16_gemm_desc *d, sdc_handle *plan);
int sdc_bf16_gemm_destroy(sdc_handle plan);
int sdc_bf16_gemm_run(const sdc_ctx *c, sdc_handle plan, uint64_t cmat, uint64_t a, uint64_t b, uint64_t bias,
                      uint64_t aux, uint64_t workspace);
/*
 * For a plan that accumulates: d = op(A) op(B) [+ bias] + cmat, cmat read and
 * d written (of C's shape and type; d may be cmat), so that a residual add
 * needs no copy of the residual into the output first.
 */
int sdc_bf16_gemm_run_into(const sdc_ctx *c, sdc_handle plan, uint64_t d, uint64_t cmat, uint64_t a, uint64_t b,
                           uint64_t bias, uint64_t aux, uint64_t workspace);
/*
 * Times up to candidates (at most 16) of cuBLASLt's algorithms for the plan
 * (the heuristic's first ones, and split-K variants of them when the first
 * fills less than one wave of the GPU) on the operands given as to
 * sdc_bf16_gemm_run, reps runs each after one warm-up, on the context's
 * stream (not while capturing: it waits for the stream), and keeps the
 * fastest in the plan. cmat is overwritten, and accumulated into again and
 * again when the plan accumulates: pass scratch of C's size when its
 * contents matter. sdc_bf16_gemm_tuned gives the mean time in nanoseconds of
 * the heuristic's first algorithm (best = 0) or of the kept one (best = 1)
 * in the last tune, 0 before one.
 */
int sdc_bf16_gemm_tune(const sdc_ctx *c, sdc_handle plan, uint64_t cmat, uint64_t a, uint64_t b, uint64_t bias,
                       uint64_t aux, uint64_t workspace, int32_t candidates, int32_t reps);
int sdc_bf16_gemm_tuned(sdc_handle plan, sdc_flag best, int64_t *ns);

/* ---- fused elementwise kernels ---- */

/* y (rows,cols) = act(y + bias) in place; bias (cols) may be 0. */
int sdc_bias_act(const sdc_ctx *c, uint64_t y, int64_t rows, int64_t cols, uint64_t bias,
                 sdc_act act);
/*
 * SDC_F32: dy (rows,cols) *= act'(y) in place (ReLU: dy = 0 where y <= 0),
 * then dbias (cols) = column sums of dy (+= when accumulate); dbias may be 0;
 * on the context's scratch (scratch is not used: 0).
 * SDC_BF16 (a bf16 Linear's bias gradient beside a dW GEMM without the
 * BGRAD_A epilogue, sd_compute_act.cu's bf16 kernels): dy bf16 (cols a
 * multiple of 8), dbias fp32 written (act SDC_IDENTITY, accumulate 0, y
 * unused), the columns summed in chunks of rows into partials in scratch
 * (sdc_bias_act_backward_scratch_bytes), then the partials in chunk order:
 * an order fixed by the shape alone.
 */
int sdc_bias_act_backward(const sdc_ctx *c, sdc_dtype dtype, uint64_t dy, uint64_t y, int64_t rows, int64_t cols,
                          uint64_t dbias, sdc_act act, sdc_flag accumulate, uint64_t scratch);
/* The bytes of device scratch sdc_bias_act_backward wants (0 for SDC_F32). */
int sdc_bias_act_backward_scratch_bytes(sdc_dtype dtype, int64_t rows, int64_t cols, int64_t *bytes);
/*
 * Softmax cross-entropy of dtype's logits (rows of ld entries, of which the
 * first classes are real) against labels int32 (rows), -1 for padding
 * (sd_compute_loss.cu).
 * SDC_F32 (ld = classes, losses 0): dlogits (rows,classes) = (softmax(logits)
 * - onehot(label)) * scale for labelled rows, 0 for the others; stats (3) +=
 * (sum of the rows' losses, rows whose first arg-max is the label, labelled
 * rows). scale is sdc_step.loss_scale when use_block = 1.
 * SDC_BF16 (the fused classifier; ld a multiple of 8, logits 16-byte
 * aligned, use_block 0): losses (rows) fp32 = logsumexp - logit[label] (0
 * for padding); dlogits must be logits, which are then overwritten by their
 * gradient (softmax - onehot) * scale in bf16 (0 in the padded columns and
 * padding rows), or 0 (no gradient); stats, when not 0, += (the sum of the
 * losses, unchanged, the labelled rows), summed in double by one block in a
 * fixed order.
 */
int sdc_softmax_xent(const sdc_ctx *c, sdc_dtype dtype, uint64_t logits, uint64_t labels, int64_t rows,
                     int64_t classes, int64_t ld, uint64_t dlogits, float scale, sdc_flag use_block, uint64_t stats,
                     uint64_t losses);
/*
 * Row gather for a dataset resident in device memory: dst (rows, cols) fp32,
 * row r = row idx[r] of src (idx: rows int32; -1 gives a row of zeros).
 * src is (N, cols) fp32 when table is 0, else (N, cols) bytes whose values
 * are table[byte] (table: 256 fp32), so dst holds the host gather's bits.
 */
int sdc_gather_rows(const sdc_ctx *c, uint64_t dst, uint64_t src, uint64_t table, uint64_t idx, int64_t rows,
                    int64_t cols);
/* dst (n) += src (n). */
int sdc_accumulate(const sdc_ctx *c, uint64_t dst, uint64_t src, int64_t n);
/* x (n) *= s. */
int sdc_scale(const sdc_ctx *c, uint64_t x, float s, int64_t n);
/* *out = sum of x[i]^2 over n elements in double, fixed order. Waits. */
int sdc_sum_squares(const sdc_ctx *c, uint64_t x, int64_t n, int64_t timeout_ns, double *out);
/*
 * Enqueues *out = sum of x[i]^2 over n elements in double, out being device
 * memory (8-byte aligned), added in the order of sdc_sum_squares and of
 * sdc_update's gradient check over the same n; n == 0 writes 0. Does not
 * wait; can be captured. The sharded update's part of the gradient check:
 * each PE's sum over its shard (sdc_update's partials).
 */
int sdc_sum_squares_enqueue(const sdc_ctx *c, uint64_t x, int64_t n, uint64_t out);

/*
 * GELU, GPT-2's tanh approximation (sd_compute_gelu.cu), of n elements of
 * dtype. SDC_F32: y (n) = gelu(x), the CPU engine's float32 bits; y may not
 * alias x. SDC_BF16: 0.5 x (1 + tanhf(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
 * in float from the bf16 inputs; y may be x.
 */
int sdc_gelu(const sdc_ctx *c, sdc_dtype dtype, uint64_t y, uint64_t x, int64_t n);
/*
 * dx (n) = dy (n) * gelu'(x (n)), likewise (SDC_BF16: the derivative of the
 * tanh form in float, times dy, rounded once); dx may be dy.
 */
int sdc_gelu_backward(const sdc_ctx *c, sdc_dtype dtype, uint64_t dx, uint64_t dy, uint64_t x, int64_t n);

/* ---- the GPT's operation groups (compute.Norms, compute.Indexing, compute.Attention) ---- */

/*
 * Layer normalisation of rows rows of cols (x, y: rows x cols; w, b: cols;
 * mean, rstd: rows) of dtype (sd_compute_layernorm.cu). SDC_F32: each row's
 * mean m and r = 1/sqrt(var + eps), the variance from a second pass over
 * x - m, and y = ((x - m) * r) * w + b. The sums in internal/hostloops'
 * order (eight lanes, its sum8) with the same round-to-nearest float32
 * operations and no FMA: the CPU engine's bits. y may not alias x.
 * SDC_BF16: x, y, w, b bf16, mean and rstd fp32 (either may be 0 when no
 * backward follows), cols a multiple of 8, eps 1e-5 (the kernels'); one warp
 * a row, r = rsqrtf(var + eps).
 */
int sdc_layer_norm(const sdc_ctx *c, sdc_dtype dtype, uint64_t y, uint64_t mean, uint64_t rstd, uint64_t x,
                   uint64_t w, uint64_t b, int64_t rows, int64_t cols, float eps);
/*
 * Its backward from dy (rows x cols) and the forward's x, w, mean, rstd.
 * SDC_F32: dx, the gradient at x, is written (add_dx = 0) or added to dx
 * (add_dx = 1); dw and db (cols) are overwritten with the sums over the rows
 * of dy * n and dy, n = (x - m) * r, added in row order (one thread a
 * column), likewise the CPU engine's bits; scratch is not used (0).
 * SDC_BF16: dx, dy, x, w bf16, dw, db, mean, rstd fp32; dx is ADDED to
 * (add_dx must be 1: the residual stream's gradient), and so are dw and db,
 * the sums over the rows going through per-block partials in scratch
 * (sdc_layer_norm_backward_scratch_bytes) in an order fixed by the shapes.
 * dx, dw and db may not alias each other or the inputs.
 */
int sdc_layer_norm_backward(const sdc_ctx *c, sdc_dtype dtype, uint64_t dx, uint64_t dw, uint64_t db, uint64_t dy,
                            uint64_t x, uint64_t w, uint64_t mean, uint64_t rstd, int64_t rows, int64_t cols,
                            sdc_flag add_dx, uint64_t scratch);
/* The bytes of device scratch sdc_layer_norm_backward wants (0 for SDC_F32). */
int sdc_layer_norm_backward_scratch_bytes(sdc_dtype dtype, int64_t rows, int64_t cols, int64_t *bytes);
/*
 * Rows of a table (table_rows x cols fp32) by int32 index (idx: rows): row i
 * of dst (rows x cols) = table row idx[i] (accumulate = 0), or += it
 * (accumulate = 1). An index of -1, or one outside the table (which the
 * caller rules out), reads as a zero row: it gives zeros, or adds nothing.
 */
int sdc_index_gather(const sdc_ctx *c, uint64_t dst, uint64_t table, uint64_t idx, int64_t rows, int64_t cols,
                     int64_t table_rows, sdc_flag accumulate);
/*
 * table row idx[i] += src row i (src: rows x cols) for every i, each element
 * of the table adding its rows in order of i (a warp owns some table rows
 * and 32 columns and walks the indices in order): the CPU engine's bits.
 * An index of -1, or one outside the table, adds nothing. table may not
 * alias src.
 */
int sdc_index_scatter_add(const sdc_ctx *c, uint64_t table, uint64_t src, uint64_t idx, int64_t rows,
                          int64_t cols, int64_t table_rows);
/*
 * The bf16 token + position embedding (GPT-2's; the fp32 engine composes the
 * two above instead): out (B,T,C) bf16 = wte[tokens] + wpe[t], wte (V,C),
 * wpe (T',C), T' >= T, bf16; C a multiple of 8. wpe 0: no positions (a
 * Llama's), out = wte[tokens] (and dwpe 0 in the backward).
 */
int sdc_embed_bf16(const sdc_ctx *c, uint64_t out, uint64_t tokens, uint64_t wte, uint64_t wpe, int64_t B, int64_t T,
                   int64_t C);
/*
 * Its backward: dwte (V,C) fp32 and dwpe (T',C) fp32 are ADDED to; tokens
 * must lie in [0,V). dwte rows are summed in increasing position order
 * (positions sorted by token with a stable radix sort, then one pass per
 * token); dwpe over b in order. scratch: 256-byte aligned, scratch_bytes of
 * sdc_embed_backward_bf16_scratch_bytes.
 */
int sdc_embed_backward_bf16(const sdc_ctx *c, uint64_t dwte, uint64_t dwpe, uint64_t dout, uint64_t tokens, int64_t B,
                            int64_t T, int64_t C, int64_t V, uint64_t scratch, int64_t scratch_bytes);
/* The bytes of device scratch sdc_embed_backward_bf16 wants. */
int sdc_embed_backward_bf16_scratch_bytes(int64_t B, int64_t T, int64_t V, int64_t *bytes);
/*
 * The causal softmax of attention, in place: p holds nmat matrices of t x t
 * scores back to back; row i of each becomes the softmax of its first i + 1
 * entries followed by zeros. hostloops' SoftmaxCausal (the row's maximum and
 * sum in eight lanes, its exp32): the CPU engine's bits.
 */
int sdc_softmax_causal(const sdc_ctx *c, uint64_t p, int64_t nmat, int64_t t);
/*
 * Its backward, in place: ds (p's layout) holds the gradient at
 * sdc_softmax_causal's output p and becomes the gradient at its input,
 * p * (ds - sum(p * ds)) over row i's first i + 1 entries, zeros after;
 * likewise hostloops' SoftmaxCausalBackward.
 */
int sdc_softmax_causal_backward(const sdc_ctx *c, uint64_t ds, uint64_t p, int64_t nmat, int64_t t);

/*
 * The bf16 causal flash attention (compute.Attention and
 * compute.GroupedAttention on bf16 tensors; the fp32 engine composes
 * sdc_gemm_batched and the two above instead): the (T,T) scores never
 * reach memory. out (B,T,NH*HS) bf16; lse (B,NH,T) fp32, the natural-log
 * logsumexp of each row of scores scaled by 1/sqrt(HS), which the backward
 * reads with the forward's out. The backward WRITES the gradients (not
 * added to), each element summed in an order fixed by the shapes, without
 * float atomics: the bits repeat (cuDNN's default form too). P and dS are
 * rounded to bf16 before their products. Pointers 16-byte aligned.
 *
 * impl picks the kernels (sdc_attn), each in its file beside the launchers
 * of sd_compute_attention.cu:
 *   SDC_ATTN_WMMA (sd_compute_attention_wmma.cu): nvcuda::wmma 16x16x16
 *     fragments through shared memory; HS 32 or 64, T a multiple of 64.
 *     The reference and the fallback.
 *   SDC_ATTN_MMA (sd_compute_attention_mma.cu): mma.sync m16n8k16 with the
 *     scores and the online softmax in registers, ldmatrix and cp.async
 *     double buffering; HS 64, T a multiple of 128; the backward keeps dS^T
 *     in the scratch (B*NH*T*(T+64) bytes) for its dQ kernel.
 *   SDC_ATTN_CUDNN (sd_compute_attention_cudnn.cu): cuDNN's fused attention
 *     engines through its backend graph API, where the library was built
 *     with cuDNN; HS a multiple of 8 up to 128; packed qkv, grouped or not
 *     (its graphs read K and V with their own heads, no copy; dK and dV
 *     summed over each group by a reduction in the graph). Plans are built per shape, layout and device on first use (by
 *     the supported or the scratch queries: call one before capturing) and
 *     kept; the scratch holds its workspace. Its backward form is
 *     SYMDDP_CUDNN_BWD's (det, the default, repeats its bits).
 *   SDC_ATTN_AUTO: cuDNN's where its plans build unless
 *     SYMDDP_ATTENTION=own (SYMDDP_ATTENTION=cudnn: always cuDNN's, failing
 *     with the reason where it cannot), else the mma kernels where they
 *     apply, else the wmma ones.
 * Every implementation takes B*NH up to 65535 and sizes whose products fit
 * the kernels' 32-bit indices.
 */
enum { SDC_ATTN_AUTO = 0, SDC_ATTN_WMMA = 1, SDC_ATTN_MMA = 2, SDC_ATTN_CUDNN = 3 };
/*
 * GPT-2's attention on packed qkv (B,T,3C) bf16, C = NH*HS: head h's q at
 * columns [h*HS,(h+1)*HS), its k at C + that, its v at 2C + that.
 */
int sdc_attention_bf16(const sdc_ctx *c, sdc_attn impl, uint64_t out, uint64_t lse, uint64_t qkv, int64_t B,
                       int64_t T, int64_t C, int64_t NH);
/*
 * Its backward from dout (B,T,C) bf16 and the forward's qkv, out and lse:
 * dqkv (B,T,3C) bf16 is written. scratch:
 * sdc_attention_backward_bf16_scratch_bytes of the same impl.
 */
int sdc_attention_backward_bf16(const sdc_ctx *c, sdc_attn impl, uint64_t dqkv, uint64_t dout, uint64_t qkv,
                                uint64_t out, uint64_t lse, int64_t B, int64_t T, int64_t C, int64_t NH,
                                uint64_t scratch);
/*
 * The bytes of device scratch sdc_attention_backward_bf16 wants with impl
 * at this shape (0 where impl's kernels do not take it). Builds cuDNN's
 * plans where impl may take them, unless the context's stream is capturing.
 */
int sdc_attention_backward_bf16_scratch_bytes(const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t T, int64_t C,
                                              int64_t NH, int64_t *bytes);
/*
 * *supported = 1 when impl's kernels take this shape of sdc_attention_bf16
 * (for SDC_ATTN_CUDNN: when its plans build here; SDC_ATTN_AUTO: the
 * kernels it picks), else 0. Builds cuDNN's plans likewise.
 */
int sdc_attention_bf16_supported(const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t T, int64_t C, int64_t NH,
                                 sdc_flag *supported);
/*
 * Grouped-query attention on packed queries, keys and values: qkv
 * (B,T,(NH+2*KVH)*HS) bf16, each row NH query heads, then KVH key heads,
 * then KVH value heads (one projection over Llama's adjacent q_proj, k_proj
 * and v_proj writes them so), NH a multiple of KVH; query head h reads
 * key/value head h/(NH/KVH) (Hugging Face's repeat_kv order) where it lies
 * (no copy); out (B,T,NH*HS). KVH == NH is GPT-2's packed qkv. impl as
 * sdc_attention_bf16's (AUTO: cuDNN's where its plans build, else the mma
 * kernels where they apply, else wmma).
 */
int sdc_grouped_attention_bf16(const sdc_ctx *c, sdc_attn impl, uint64_t out, uint64_t lse, uint64_t qkv, int64_t B,
                               int64_t T, int64_t NH, int64_t KVH, int64_t HS);
/*
 * Its backward: dqkv (qkv's shape and layout) bf16 written; a key/value
 * head's dk and dv sum its group's query heads in order, in the kernels'
 * registers. scratch: sdc_grouped_attention_backward_bf16_scratch_bytes.
 */
int sdc_grouped_attention_backward_bf16(const sdc_ctx *c, sdc_attn impl, uint64_t dqkv, uint64_t dout, uint64_t qkv,
                                        uint64_t out, uint64_t lse, int64_t B, int64_t T, int64_t NH, int64_t KVH,
                                        int64_t HS, uint64_t scratch);
/*
 * The bytes of device scratch sdc_grouped_attention_backward_bf16 wants
 * with impl at this shape (0 where impl's kernels do not take it). Builds
 * cuDNN's plans where impl may take them, unless the context's stream is
 * capturing.
 */
int sdc_grouped_attention_backward_bf16_scratch_bytes(const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t T,
                                                      int64_t NH, int64_t KVH, int64_t HS, int64_t *bytes);
/*
 * *supported = 1 when impl's kernels take this shape of
 * sdc_grouped_attention_bf16 (as sdc_attention_bf16_supported), else 0.
 */
int sdc_grouped_attention_bf16_supported(const sdc_ctx *c, sdc_attn impl, int64_t B, int64_t T, int64_t NH,
                                         int64_t KVH, int64_t HS, sdc_flag *supported);

/*
 * The fp32 causal flash attention (compute.Attention and
 * compute.GroupedAttention on fp32 tensors with a head size up to 64;
 * sd_compute_attention_f32.cu): the (T,T) scores never reach memory. One
 * layout serves GPT-2's packed qkv and grouped-query attention: query head h
 * of row r (= b*T + t) at q + r*ldq + h*HS, its key and value at
 * k + r*ldkv + (h/(NH/KVH))*HS and v + r*ldkv + (h/(NH/KVH))*HS (packed
 * qkv (B,T,3C): q = qkv, k = qkv + C, v = qkv + 2C, ldq = ldkv = 3C,
 * KVH = NH); out (B,T,NH*HS); lse (B,NH,T), the natural-log logsumexp of
 * each row of scores scaled by 1/sqrt(HS). SIMT fp32 (FMA, no TF32): the
 * scores, the online softmax (exp2 of base-2 scaled scores) and the products
 * by 64 x 64 tiles in shared memory, so the sums run in another order than
 * the CPU engine's: its results agree to fp32 rounding, not bit for bit.
 * 1 <= HS <= 64, NH a multiple of KVH, every index within an int64.
 */
int sdc_attention_f32(const sdc_ctx *c, uint64_t out, uint64_t lse, uint64_t q, uint64_t k, uint64_t v, int64_t ldq,
                      int64_t ldkv, int64_t B, int64_t T, int64_t NH, int64_t KVH, int64_t HS);
/*
 * Its backward from dout (B,T,NH*HS) and the forward's q, k, v, out and lse:
 * dq, dk, dv (at q's, k's, v's offsets with their strides) WRITTEN, each
 * element summed in an order fixed by the shapes (a key/value head's over
 * its group's query heads in order), without atomics: the bits repeat.
 * scratch: R4 + B*NH*nb*(nb+1)/2*4096 floats, R4 = B*NH*T rounded up to a
 * multiple of 4 and nb = ceil(T/64): each row's rowsum(dout * out), then
 * dS = P (dP - D) of every causal 64 x 64 tile, written by the dK/dV
 * kernel and read by the dQ kernel, which so computes one product a tile
 * instead of three (at GPT-2 124M, batch 8: 214 MB, shared by the layers).
 */
int sdc_attention_backward_f32(const sdc_ctx *c, uint64_t dq, uint64_t dk, uint64_t dv, uint64_t dout, uint64_t q,
                               uint64_t k, uint64_t v, uint64_t out, uint64_t lse, int64_t ldq, int64_t ldkv,
                               int64_t B, int64_t T, int64_t NH, int64_t KVH, int64_t HS, uint64_t scratch);

/* ---- a Llama block's operation groups (compute.RMSNorms, compute.SwiGLUs, compute.Rotary) ----
 * Each takes the dtype of its tensors: in fp32 the CPU engine's bits, in
 * bf16 the same float32 operations on the widened elements, each result
 * rounded to bf16 once, where it is stored. */

/*
 * RMS normalisation over rows (x, y: rows x cols of dtype; w: cols of dtype;
 * rstd: rows of fp32): each row's r = 1/sqrt(sum(x * x) / cols + eps), the
 * rounded squares added in lanes (fp32: internal/hostloops' eight lanes, its
 * dot8; bf16: a warp's 32 lanes, added pairwise, neighbours first, then the
 * elements past the multiple of 32 in order), and y = (x * r) * w, with
 * round-to-nearest float32 operations and no FMA. y may not alias x.
 */
int sdc_rms_norm(const sdc_ctx *c, sdc_dtype dtype, uint64_t y, uint64_t rstd, uint64_t x, uint64_t w, int64_t rows,
                 int64_t cols, float eps);
/*
 * Its backward from dy (rows x cols of dtype) and the forward's x, w, rstd:
 * with n = x * r and g = w * dy, dx = (g - n * (sum(g * n) / cols)) * r (the
 * sum in the forward's lanes) is written (add_dx = 0) or added to dx
 * (add_dx = 1; in bf16 the sum rounded once); dw (cols, fp32) is overwritten
 * with the sum over the rows of dy * n: in fp32 added in row order (one
 * thread a column, the CPU engine's bits), in bf16 in chunks of 128 rows
 * (fewer, longer ones where the context's scratch holds fewer partials),
 * each from 0 in row order, the chunks' sums then added in chunk order.
 * dx and dw may not alias each other or the inputs.
 */
int sdc_rms_norm_backward(const sdc_ctx *c, sdc_dtype dtype, uint64_t dx, uint64_t dw, uint64_t dy, uint64_t x,
                          uint64_t w, uint64_t rstd, int64_t rows, int64_t cols, sdc_flag add_dx);
/*
 * y (rows, f) = silu(a) * b element by element from ab (rows, 2f), row r of
 * ab [a | b] (the joined gate_proj and up_proj GEMM's output), silu(a) = a * s
 * with s = 1 / (1 + e^-a) (hostloops' exp32), in float32. y may not alias ab.
 */
int sdc_swiglu(const sdc_ctx *c, sdc_dtype dtype, uint64_t y, uint64_t ab, int64_t rows, int64_t f);
/*
 * Its backward: dab (rows, 2f), row r [da | db], from dy (rows, f) and ab:
 * da = (dy * b) * (s + e * s * s * a) (silu'(a), with e = e^-a) and
 * db = (a * s) * dy, likewise. dab may alias nothing.
 */
int sdc_swiglu_backward(const sdc_ctx *c, sdc_dtype dtype, uint64_t dab, uint64_t dy, uint64_t ab, int64_t rows,
                        int64_t f);
/*
 * Rotary position embedding: y = x (rows of width elements of dtype, ld
 * elements apart, ld >= width; heads of hs channels side by side: hs even,
 * width a multiple of hs; the columns past width are not touched) with each head's
 * channel i < hs/2 turned with channel i + hs/2 by the angle whose cosine and
 * sine are cos_tab[p * hs/2 + i] and sin_tab[p * hs/2 + i] (fp32 device
 * tables of t x hs/2), p = row mod t:
 *   y[i] = x[i] * cos - x[i + hs/2] * sin,  y[i + hs/2] = x[i + hs/2] * cos + x[i] * sin,
 * or by the opposite angle when inverse = 1 (the gradient): hostloops'
 * Rotate. y may be x; otherwise it may not alias x.
 */
int sdc_rotate(const sdc_ctx *c, sdc_dtype dtype, uint64_t y, uint64_t x, uint64_t cos_tab, uint64_t sin_tab,
               int64_t rows, int64_t width, int64_t ld, int64_t hs, int64_t t, sdc_flag inverse);

/* ---- bf16 casts (sd_compute_cast.cu: a bf16 gradient allreduce, the bf16 copy of the master weights) ---- */

/* dst: n bf16 = src (n fp32) rounded to nearest even; every NaN gives 0x7fc0. */
int sdc_cast_bf16(const sdc_ctx *c, uint64_t dst, uint64_t src, int64_t n);
/*
 * The same cast of a bf16 copy of master weights, unless the word at flag
 * (device memory, 4-byte aligned) is not 0: sdc_update wrote the copy with
 * the parameters and set it. Either way the word is 0 afterwards.
 */
int sdc_cast_bf16_unless(const sdc_ctx *c, uint64_t dst, uint64_t src, int64_t n, uint64_t flag);
/* dst: n fp32 = src (n bf16), exactly (the bf16 bits in the high half). */
int sdc_cast_f32(const sdc_ctx *c, uint64_t dst, uint64_t src, int64_t n);

/* ---- optimizer ---- */

/*
 * One optimizer step over a whole arena of n elements: params, grads and the
 * state slots (state1 only for Adam and AdamW; none for SGD without
 * momentum). First a deterministic norm of grads (double): non-finite
 * gradients skip the step (status[SKIPPED] = 1, params and state unchanged),
 * and max_norm > 0 scales the gradients by optim.ClipFactor inside the update
 * (grads themselves are not written). The update is the exact float32
 * sequence of optim's doc comments (round-to-nearest, no FMA contraction,
 * IEEE division and square root). Per-step values come from step (use_block =
 * 0) or from the step block (use_block = 1). exempt, when not 0, is n bytes
 * of device memory: an element whose byte is not 0 gets no weight decay (the
 * optimizer's sequence with weight_decay 0 and AdamW's decay 1), for models
 * whose biases and norms do not decay.
 *
 * The sharded update (ZeRO-1): params, grads, exempt and the state slots are
 * one PE's shard of n elements, and partials, when not 0, is where the PEs'
 * sums of squares of their shards are (sdc_sum_squares_enqueue, gathered
 * from every PE): nparts doubles at byte addresses partials + k*part_stride
 * (8-byte aligned), k = 0 .. nparts-1. The gradient check then reads no
 * gradient: one thread adds the doubles from 0.0 in order of k, and the
 * same verdict follows (skip, halt, clip factor, norm), so that every PE
 * decides alike. With n == 0 only the verdict is written. partials = 0
 * (nparts = part_stride = 0): the check sums the squares of grads itself.
 *
 * copy (not with partials; 0: none): the bf16 copy of the master weights
 * that the bf16 kernels read, for the elements [copy_lo, copy_lo + copy_n)
 * of the n, element copy_lo at copy: each updated parameter is also written
 * there rounded as sdc_cast_bf16 rounds, and the word at copy_flag (when not
 * 0) is set to 1, so that the next forward's sdc_cast_bf16_unless has
 * nothing to do. A skipped step sets the word too: the forward before it
 * left the copy current, and no parameter changed.
 */
int sdc_update(const sdc_ctx *c, const sdc_optim *o, const sdc_step *step, sdc_flag use_block,
               uint64_t params, uint64_t grads, uint64_t state0, uint64_t state1, uint64_t exempt, int64_t n,
               uint64_t partials, int32_t nparts, int64_t part_stride, uint64_t copy, int64_t copy_lo,
               int64_t copy_n, uint64_t copy_flag);
/* Zeroes the update status (clears a halt). */
int sdc_reset_status(const sdc_ctx *c);
/*
 * From now on, for the whole process, the bf16 GEMM plans take cuBLASLt
 * algorithms whose thread-block clusters are one block (sd_lt.cuh), unless
 * SYMDDP_CUDA_LT_NOCLUSTER=0 is set: call it before the plans are made when
 * other PEs' kernels share the GPU while gradient buckets are reduced during
 * backward (under MPS, a several-block cluster could then wait for SMs that
 * the other PEs' parked barrier warps hold, and the step hung).
 */
int sdc_one_block_clusters(const sdc_ctx *c);

/*
 * AdamW with a bf16 copy, for a bf16 training step written against the
 * kernels directly (cuda/gptcheck/step.cu; the engine's update is
 * sdc_update): params, grads, m, v: n fp32; params_bf16 (n bf16, or 0)
 * receives the updated params rounded. decay: one byte per chunk of chunk
 * elements (element i decays when decay[i / chunk] != 0); 0: every element
 * decays. hyper: the DEVICE address of an sdc_adamw_hyper, read by the
 * kernel (so a graph replays with new values written there). The gradient is
 * multiplied by grad_scale first. PyTorch's AdamW in float: p -= lr*wd*p;
 * m, v moments; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps), bc_i = 1 -
 * beta_i^step by powf.
 */
typedef struct {
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    int32_t step; /* 1 for the first update */
    int32_t pad;
} sdc_adamw_hyper;
int sdc_adamw_bf16(const sdc_ctx *c, uint64_t params, uint64_t params_bf16, uint64_t grads, uint64_t m, uint64_t v,
                   uint64_t decay, int64_t chunk, int64_t n, uint64_t hyper);

/* ---- CUDA graphs ---- */

/* Enqueues the write of values into the step block (a kernel taking them by value). */
int sdc_set_step(const sdc_ctx *c, const sdc_step *values);
/* Starts capturing the stream (thread-local mode: call the end from the same thread). */
int sdc_capture_begin(const sdc_ctx *c);
/*
 * Ends the capture and instantiates the graph into *exec. On failure the
 * capture is over and nothing is kept; *exec is 0.
 */
int sdc_capture_end(const sdc_ctx *c, sdc_handle *exec);
/* 1 when the stream is capturing. */
int sdc_capturing(const sdc_ctx *c, sdc_flag *capturing);
/* Launches the graph on the stream, its step-reading kernels taking values as arguments. */
int sdc_graph_launch(const sdc_ctx *c, sdc_handle exec, const sdc_step *values);
int sdc_graph_destroy(sdc_handle exec);

#ifdef __cplusplus
}
#endif

#endif /* SYMDDP_COMPUTE_H */
