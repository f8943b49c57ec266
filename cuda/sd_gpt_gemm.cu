/*
 * sd_gpt_gemm.cu: bf16 GEMMs with fused epilogues on cuBLASLt, planned once
 * (symddp_gpt.h).
 *
 * Row-major to column-major as in sd_compute_lt.cu: the row-major
 * C (m,n) = op(A) op(B) is the column-major C^T (n,m) = op(B)^T op(A)^T, so
 * cuBLASLt's A is our B (transposed when trans_b), its B our A, its m our n
 * and its n our m. Hence a bias with one value per row of cuBLASLt's D is one
 * value per column of our C, and BGRADB (the bias gradient of cuBLASLt's B
 * operand, one value per column of its D) is our row sums of op(A):
 * SDG_EPI_BGRAD_A. The GELU aux matrix has D's layout: (n rows, m columns)
 * column-major with ld n, which is our (m,n) row-major.
 *
 * A plan holds the operation descriptor (fp32 compute and scale, the
 * transposes, the epilogue and its types), the three layouts (with the batch
 * count and strides) and the heuristic's first algorithm for the workspace
 * the caller promises; sdg_gemm_run sets the bias and aux pointers (host
 * calls only) and enqueues cublasLtMatmul, so a step with it can be captured.
 */
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "sd_gpt.cuh"
#include "sd_lt.cuh"

struct sdg_gemm_s {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt's A (our b), B (our a), C = D */
    cublasLtMatmulAlgo_t algo;
    size_t workspace; /* bytes the algorithm needs */
    sdg_gemm_desc d;
    float first_us, best_us; /* sdg_gemm_tune's times */
};

#define SDG_LT(call)                                                                                      \
    do {                                                                                                  \
        cublasStatus_t sdg_st_ = (call);                                                                  \
        if (sdg_st_ != CUBLAS_STATUS_SUCCESS)                                                             \
            return sdg_fail(SDG_ERR_BLAS, __FILE__, __LINE__, "%s: %s", #call, cublasLtGetStatusString(sdg_st_)); \
    } while (0)

static const char *sdg_epi_name(int e) {
    switch (e) {
    case SDG_EPI_NONE: return "none";
    case SDG_EPI_BIAS: return "bias";
    case SDG_EPI_GELU_BIAS: return "gelu+bias";
    case SDG_EPI_GELU_AUX_BIAS: return "gelu+aux+bias";
    case SDG_EPI_DGELU: return "dgelu";
    case SDG_EPI_DGELU_BGRAD: return "dgelu+bgrad";
    case SDG_EPI_BGRAD_A: return "bgrad-a";
    }
    return "?";
}

static bool sdg_epi_has_bias(int e) { return e != SDG_EPI_NONE && e != SDG_EPI_DGELU; }
static bool sdg_epi_has_aux(int e) {
    return e == SDG_EPI_GELU_AUX_BIAS || e == SDG_EPI_DGELU || e == SDG_EPI_DGELU_BGRAD;
}

extern "C" int sdg_lt_create(sdg_lt **lt) {
    if (!lt) return SDG_FAIL(SDG_ERR_ARG, "sdg_lt_create: NULL");
    cublasLtHandle_t h = NULL;
    const cublasStatus_t st = cublasLtCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS) return SDG_FAIL(SDG_ERR_BLAS, "cublasLtCreate: status %d", (int)st);
    *lt = (sdg_lt *)h;
    return SDG_OK;
}

extern "C" void sdg_lt_destroy(sdg_lt *lt) {
    if (lt) cublasLtDestroy((cublasLtHandle_t)lt);
}

extern "C" void sdg_gemm_destroy(sdg_gemm *p) {
    if (!p) return;
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    free(p);
}

static int sdg_layout_batch(cublasLtMatrixLayout_t l, int32_t batch, int64_t stride) {
    SDG_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
    SDG_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    return SDG_OK;
}

/* The heuristic's first n algorithms for p's descriptors within the
 * workspace p's desc promises, 16-byte aligned operands. */
static cublasStatus_t sdg_heuristics(const sdg_gemm *p, cublasLtHandle_t lt, int n,
                                     cublasLtMatmulHeuristicResult_t *res, int *found) {
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t st = cublasLtMatmulPreferenceCreate(&pref);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    const uint64_t ws = (uint64_t)p->d.workspace_bytes;
    const uint32_t align = 16;
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    const cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
        st = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof align);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, n, res, found);
    cublasLtMatmulPreferenceDestroy(pref);
    return st;
}

/* Fills p from d; p's handles are released by the caller on failure. */
static int sdg_gemm_plan(sdg_gemm *p, cublasLtHandle_t lt, const sdg_gemm_desc *d) {
    const int e = d->epilogue;
    cublasLtEpilogue_t epi;
    switch (e) {
    case SDG_EPI_NONE: epi = CUBLASLT_EPILOGUE_DEFAULT; break;
    case SDG_EPI_BIAS: epi = CUBLASLT_EPILOGUE_BIAS; break;
    case SDG_EPI_GELU_BIAS: epi = CUBLASLT_EPILOGUE_GELU_BIAS; break;
    case SDG_EPI_GELU_AUX_BIAS: epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS; break;
    case SDG_EPI_DGELU: epi = CUBLASLT_EPILOGUE_DGELU; break;
    case SDG_EPI_DGELU_BGRAD: epi = CUBLASLT_EPILOGUE_DGELU_BGRAD; break;
    case SDG_EPI_BGRAD_A: epi = CUBLASLT_EPILOGUE_BGRADB; break; /* see the top of the file */
    default: return SDG_FAIL(SDG_ERR_ARG, "sdg_gemm_create: unknown epilogue %d", e);
    }
    const cudaDataType_t ctype = d->c_type == SDG_F32 ? CUDA_R_32F : CUDA_R_16BF;
    const cublasOperation_t op_lt_a = d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_lt_b = d->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const uint64_t lt_m = (uint64_t)d->n, lt_n = (uint64_t)d->m, k = (uint64_t)d->k;

    SDG_LT(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    SDG_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a, sizeof op_lt_a));
    SDG_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b, sizeof op_lt_b));
    SDG_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (sdg_epi_has_bias(e) && d->bias_type != d->c_type) { /* cuBLASLt's default: the type of D */
        const int32_t bias_type = d->bias_type == SDG_F32 ? CUDA_R_32F : CUDA_R_16BF;
        SDG_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                              sizeof bias_type));
    }
    if (sdg_epi_has_aux(e)) {
        const int64_t aux_ld = d->n;
        SDG_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
    }
    /* Stored row-major X (r,c) is column-major (c,r) with ld c. */
    const uint64_t b_rows = d->trans_b ? lt_m : k, b_cols = d->trans_b ? k : lt_m; /* our b as stored */
    const uint64_t a_rows = d->trans_a ? k : lt_n, a_cols = d->trans_a ? lt_n : k; /* our a as stored */
    SDG_LT(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, b_cols, b_rows, (int64_t)b_cols));
    SDG_LT(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, a_cols, a_rows, (int64_t)a_cols));
    SDG_LT(cublasLtMatrixLayoutCreate(&p->lc, ctype, lt_m, lt_n, (int64_t)lt_m));
    if (d->batch > 1) {
        int rc = sdg_layout_batch(p->la, d->batch, d->stride_b);
        if (rc == SDG_OK) rc = sdg_layout_batch(p->lb, d->batch, d->stride_a);
        if (rc == SDG_OK) rc = sdg_layout_batch(p->lc, d->batch, d->stride_c);
        if (rc != SDG_OK) return rc;
    }

    const uint64_t ws = (uint64_t)d->workspace_bytes;
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    const cublasStatus_t st = sdg_heuristics(p, lt, 1, &res, &found);
    if (st != CUBLAS_STATUS_SUCCESS)
        return SDG_FAIL(SDG_ERR_BLAS, "sdg_gemm_create (epilogue %s): heuristic: %s", sdg_epi_name(e),
                        cublasLtGetStatusString(st));
    if (found < 1 || res.state != CUBLAS_STATUS_SUCCESS || res.workspaceSize > (size_t)ws)
        return SDG_FAIL(SDG_ERR_BLAS,
                        "sdg_gemm_create: cuBLASLt has no bf16 algorithm for epilogue %s (%c%c m=%d n=%d k=%d batch %d, C %s, bias %s) within %llu bytes of workspace",
                        sdg_epi_name(e), d->trans_a ? 'T' : 'N', d->trans_b ? 'T' : 'N', d->m, d->n, d->k, d->batch,
                        d->c_type == SDG_F32 ? "fp32" : "bf16", d->bias_type == SDG_F32 ? "fp32" : "bf16",
                        (unsigned long long)ws);
    p->algo = res.algo;
    p->workspace = res.workspaceSize;
    return SDG_OK;
}

extern "C" int sdg_gemm_create(sdg_gemm **plan, void *lt, const sdg_gemm_desc *d) {
    if (!plan || !lt || !d) return SDG_FAIL(SDG_ERR_ARG, "sdg_gemm_create: NULL argument");
    *plan = NULL;
    if (d->m <= 0 || d->n <= 0 || d->k <= 0 || d->batch < 1 || d->workspace_bytes < 0)
        return SDG_FAIL(SDG_ERR_ARG, "sdg_gemm_create: m=%d n=%d k=%d batch=%d workspace %lld", d->m, d->n, d->k,
                        d->batch, (long long)d->workspace_bytes);
    if (d->batch > 1 && d->epilogue != SDG_EPI_NONE)
        return SDG_FAIL(SDG_ERR_ARG, "sdg_gemm_create: batched GEMMs take no epilogue");
    if (sdg_epi_has_aux(d->epilogue) && (d->n % 8 != 0 || d->c_type != SDG_BF16))
        return SDG_FAIL(SDG_ERR_ARG, "sdg_gemm_create: GELU epilogues want n a multiple of 8 and a bf16 C (n=%d)", d->n);
    sdg_gemm *p = (sdg_gemm *)calloc(1, sizeof *p);
    if (!p) return SDG_FAIL(SDG_ERR_ARG, "sdg_gemm_create: out of host memory");
    p->d = *d;
    int rc = sdg_gemm_plan(p, (cublasLtHandle_t)lt, d);
    if (rc != SDG_OK) {
        sdg_gemm_destroy(p);
        return rc;
    }
    *plan = p;
    return SDG_OK;
}

#define SDG_TUNE_HEUR 16 /* heuristic candidates at most */
#define SDG_TUNE_MAX 64  /* with their split-K variants */

extern "C" int sdg_gemm_tune(sdg_gemm *p, void *lt, void *c, const void *a, const void *b, void *bias, void *aux,
                             void *workspace, void *stream, int candidates, int reps) {
    if (!p || !lt) return SDG_FAIL(SDG_ERR_ARG, "sdg_gemm_tune: NULL argument");
    if (candidates < 1 || reps < 1) return SDG_FAIL(SDG_ERR_ARG, "sdg_gemm_tune: %d candidates, %d runs", candidates, reps);
    cudaStream_t s = (cudaStream_t)stream;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    SDG_CUDA(cudaStreamIsCapturing(s, &cs));
    if (cs != cudaStreamCaptureStatusNone) return SDG_FAIL(SDG_ERR_ARG, "sdg_gemm_tune: the stream is capturing");
    cublasLtMatmulHeuristicResult_t res[SDG_TUNE_MAX];
    memset(res, 0, sizeof res);
    int found = 0;
    const cublasStatus_t st =
        sdg_heuristics(p, (cublasLtHandle_t)lt, candidates < SDG_TUNE_HEUR ? candidates : SDG_TUNE_HEUR, res, &found);
    if (st != CUBLAS_STATUS_SUCCESS)
        return SDG_FAIL(SDG_ERR_BLAS, "sdg_gemm_tune: heuristic: %s", cublasLtGetStatusString(st));
    /* a choice that fills less than a wave (a dW: few output tiles, k the tokens) also gets split-K variants */
    found = sd_lt_split_variants((cublasLtHandle_t)lt, p->desc, p->la, p->lb, p->lc, (uint64_t)p->d.k,
                                 (size_t)p->d.workspace_bytes, res, found, 0, SDG_TUNE_MAX);
    /* The plan's own algorithm (the one-candidate query's choice) is the first
     * timed, so that "the heuristic's" time is the plan's: the longer query's
     * first candidate need not be it. (The slower head GEMMs that led here,
     * 1610.6 us before tuning and 1886.6 after, were the GPU's clocks after a
     * run of large GEMMs: the same algorithm timed 1576.3 us, then 1879.2 us,
     * on the H200 on 2026-12-02.) */
    int at = -1;
    for (int i = 0; i < found && at < 0; i++)
        if (!memcmp(&res[i].algo, &p->algo, sizeof p->algo)) at = i;
    cublasLtMatmulHeuristicResult_t own;
    if (at >= 0) {
        own = res[at]; /* listed further down: moved to the front */
    } else {
        memset(&own, 0, sizeof own);
        own.algo = p->algo;
        own.workspaceSize = p->workspace;
        own.state = CUBLAS_STATUS_SUCCESS;
        at = found < SDG_TUNE_MAX ? found++ : found - 1; /* the last one makes room when the list is full */
    }
    memmove(&res[1], &res[0], (size_t)at * sizeof res[0]);
    res[0] = own;
    cudaEvent_t t0, t1;
    SDG_CUDA(cudaEventCreate(&t0));
    if (cudaEventCreate(&t1) != cudaSuccess) {
        cudaEventDestroy(t0);
        return SDG_FAIL(SDG_ERR_CUDA, "sdg_gemm_tune: cudaEventCreate failed");
    }
    const cublasLtMatmulAlgo_t first = p->algo;
    const size_t first_ws = p->workspace;
    float best = 0.f, first_us = 0.f;
    int picked = -1, rc = SDG_OK;
    for (int i = 0; i < found && rc == SDG_OK; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize > (size_t)p->d.workspace_bytes) continue;
        p->algo = res[i].algo;
        p->workspace = res[i].workspaceSize;
        rc = sdg_gemm_run(p, lt, c, a, b, bias, aux, workspace, stream); /* warm-up; a failing algorithm: skipped */
        if (rc != SDG_OK) {
            rc = SDG_OK;
            (void)cudaGetLastError();
            continue;
        }
        if (cudaEventRecord(t0, s) != cudaSuccess) rc = SDG_FAIL(SDG_ERR_CUDA, "sdg_gemm_tune: cudaEventRecord");
        for (int r = 0; r < reps && rc == SDG_OK; r++) rc = sdg_gemm_run(p, lt, c, a, b, bias, aux, workspace, stream);
        float ms = 0.f;
        if (rc == SDG_OK && (cudaEventRecord(t1, s) != cudaSuccess || cudaEventSynchronize(t1) != cudaSuccess ||
                             cudaEventElapsedTime(&ms, t0, t1) != cudaSuccess))
            rc = SDG_FAIL(SDG_ERR_CUDA, "sdg_gemm_tune: timing failed");
        const float us = 1000.f * ms / (float)reps;
        if (i == 0) first_us = us;
        if (rc == SDG_OK && (picked < 0 || us < best)) {
            best = us;
            picked = i;
        }
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    if (rc != SDG_OK || picked < 0) {
        p->algo = first;
        p->workspace = first_ws;
        return rc != SDG_OK ? rc : SDG_FAIL(SDG_ERR_BLAS, "sdg_gemm_tune: no algorithm ran");
    }
    p->algo = res[picked].algo;
    p->workspace = res[picked].workspaceSize;
    p->first_us = first_us;
    p->best_us = best;
    return SDG_OK;
}

extern "C" int sdg_gemm_tuned_ns(const sdg_gemm *p, int best) {
    return !p ? 0 : (int)(1000.f * (best ? p->best_us : p->first_us));
}

/* d = op(A) op(B) [+ epilogue] [+ c when the plan accumulates]; c = d in place */
static int sdg_gemm_enqueue(const char *what, sdg_gemm *p, void *lt, void *d, const void *c, const void *a,
                            const void *b, void *bias, void *aux, void *workspace, void *stream) {
    if (!p || !lt || !d || !c || !a || !b) return SDG_FAIL(SDG_ERR_ARG, "%s: NULL argument", what);
    const int e = p->d.epilogue;
    if (sdg_epi_has_bias(e)) {
        if (!bias) return SDG_FAIL(SDG_ERR_ARG, "%s: epilogue %s without a bias vector", what, sdg_epi_name(e));
        SDG_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    if (sdg_epi_has_aux(e)) {
        if (!aux) return SDG_FAIL(SDG_ERR_ARG, "%s: epilogue %s without an aux matrix", what, sdg_epi_name(e));
        SDG_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    }
    if (p->workspace > 0 && !workspace) return SDG_FAIL(SDG_ERR_ARG, "%s: the algorithm needs a workspace", what);
    const float alpha = 1.f, beta = p->d.accumulate ? 1.f : 0.f;
    SDG_LT(cublasLtMatmul((cublasLtHandle_t)lt, p->desc, &alpha, b, p->la, a, p->lb, &beta, c, p->lc, d, p->lc,
                          &p->algo, workspace, p->workspace, (cudaStream_t)stream));
    return SDG_OK;
}

extern "C" int sdg_gemm_run(sdg_gemm *p, void *lt, void *c, const void *a, const void *b, void *bias, void *aux,
                            void *workspace, void *stream) {
    return sdg_gemm_enqueue("sdg_gemm_run", p, lt, c, c, a, b, bias, aux, workspace, stream);
}

extern "C" int sdg_gemm_run_into(sdg_gemm *p, void *lt, void *d, const void *c, const void *a, const void *b,
                                 void *bias, void *aux, void *workspace, void *stream) {
    if (p && !p->d.accumulate)
        return SDG_FAIL(SDG_ERR_ARG, "sdg_gemm_run_into: the plan does not accumulate, so it reads no C");
    return sdg_gemm_enqueue("sdg_gemm_run_into", p, lt, d, c, a, b, bias, aux, workspace, stream);
}
