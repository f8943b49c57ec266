/*
 * sd_compute_gemm.cu: row-major GEMM on cuBLAS, one product or a batch at
 * fixed strides.
 *
 * cuBLAS is column-major. A row-major matrix X (r,c) stored with row length
 * ldx is, read column-major, X^T (c,r) with leading dimension ldx. So the
 * row-major product C (m,n) = op(A) (m,k) * op(B) (k,n) is computed as the
 * column-major C^T (n,m) = op(B)^T (n,k) * op(A)^T (k,m): cublasSgemm with
 * the operands swapped, each keeping its own transpose flag. These are the
 * same three calls PyTorch's Linear makes (forward x*W^T, dW = dy^T*x,
 * dx = dy*W).
 *
 * The handle is bound to the context's stream with a preallocated workspace
 * and default math (fp32 FFMA, no TF32), so calls can be captured in a graph.
 */
#include <limits.h>

#include <cublas_v2.h>

#include "sd_compute.cuh"
#include "sd_internal.h"
#include "symddp_compute.h"

extern "C" int sdc_gemm(const sdc_ctx *c, int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                        int64_t k, float alpha, uint64_t a, int64_t lda, uint64_t b, int64_t ldb,
                        float beta, uint64_t cmat, int64_t ldc) {
    if (!c || !c->blas) return SD_FAIL(SD_ERR_ARG, "sdc_gemm: no context");
    if (!sdc_fits_int(m) || !sdc_fits_int(n) || !sdc_fits_int(k) || !sdc_fits_int(lda) ||
        !sdc_fits_int(ldb) || !sdc_fits_int(ldc))
        return SD_FAIL(SD_ERR_ARG, "sdc_gemm: sizes %lld x %lld x %lld (ld %lld %lld %lld) do not fit cuBLAS's int",
                       (long long)m, (long long)n, (long long)k, (long long)lda, (long long)ldb,
                       (long long)ldc);
    if (m == 0 || n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    /* Column-major C^T (n,m) = op(B)^T (n,k) * op(A)^T (k,m). */
    cublasStatus_t st = cublasSgemm((cublasHandle_t)(uintptr_t)c->blas, op_b, op_a, (int)n, (int)m,
                                    (int)k, &alpha, (const float *)(uintptr_t)b, (int)ldb,
                                    (const float *)(uintptr_t)a, (int)lda, &beta,
                                    (float *)(uintptr_t)cmat, (int)ldc);
    if (st != CUBLAS_STATUS_SUCCESS)
        return SD_FAIL(SD_ERR, "cublasSgemm(%c%c, m=%lld n=%lld k=%lld): %s", trans_a ? 'T' : 'N',
                       trans_b ? 'T' : 'N', (long long)m, (long long)n, (long long)k,
                       cublasGetStatusString(st));
    return SD_OK;
}

/* sdc_gemm over batch matrices at fixed strides (attention's products per head). */
extern "C" int sdc_gemm_batched(const sdc_ctx *c, int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k,
                                float alpha, uint64_t a, int64_t lda, int64_t stride_a, uint64_t b, int64_t ldb,
                                int64_t stride_b, float beta, uint64_t cmat, int64_t ldc, int64_t stride_c,
                                int64_t batch) {
    if (!c || !c->blas) return SD_FAIL(SD_ERR_ARG, "sdc_gemm_batched: no context");
    if (!sdc_fits_int(m) || !sdc_fits_int(n) || !sdc_fits_int(k) || !sdc_fits_int(lda) || !sdc_fits_int(ldb) ||
        !sdc_fits_int(ldc) || !sdc_fits_int(batch) || stride_a < 0 || stride_b < 0 || stride_c < 0)
        return SD_FAIL(SD_ERR_ARG,
                       "sdc_gemm_batched: %lld products of %lld x %lld x %lld (ld %lld %lld %lld, strides %lld %lld "
                       "%lld) do not fit cuBLAS",
                       (long long)batch, (long long)m, (long long)n, (long long)k, (long long)lda, (long long)ldb,
                       (long long)ldc, (long long)stride_a, (long long)stride_b, (long long)stride_c);
    if (m == 0 || n == 0 || batch == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    /* Column-major C^T (n,m) = op(B)^T (n,k) * op(A)^T (k,m), product by product. */
    cublasStatus_t st = cublasSgemmStridedBatched(
        (cublasHandle_t)(uintptr_t)c->blas, op_b, op_a, (int)n, (int)m, (int)k, &alpha, (const float *)(uintptr_t)b,
        (int)ldb, (long long)stride_b, (const float *)(uintptr_t)a, (int)lda, (long long)stride_a, &beta,
        (float *)(uintptr_t)cmat, (int)ldc, (long long)stride_c, (int)batch);
    if (st != CUBLAS_STATUS_SUCCESS)
        return SD_FAIL(SD_ERR, "cublasSgemmStridedBatched(%c%c, m=%lld n=%lld k=%lld, batch %lld): %s",
                       trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', (long long)m, (long long)n, (long long)k,
                       (long long)batch, cublasGetStatusString(st));
    return SD_OK;
}
