/*
 * sd_lt.cuh: what the two cuBLASLt planners of sd_compute_lt.cu (the fp32
 * plans and the bf16 GEMM plans) share when they choose an algorithm: the
 * usable candidates and the split-K variants of an underfilling choice.
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

/* Heuristic candidates whose split-K variants are tried, and the splits. */
#define SD_LT_SPLIT_BASES 6
static const int32_t sd_lt_splits[] = {2, 3, 4, 6, 8, 12, 16, 24, 32};
/* A split gets at least this many of k's elements. */
#define SD_LT_MIN_SPLIT_K 16

/* The algorithm's thread-block cluster shape (CUBLASLT_CLUSTER_SHAPE_*, 0 for
 * AUTO), -1 when the library does not say. */
static inline int sd_lt_cluster(const cublasLtMatmulAlgo_t *a) {
    uint16_t c = 0;
    size_t got = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &c, sizeof c, &got) !=
        CUBLAS_STATUS_SUCCESS)
        return -1;
    return (int)c;
}

/* Set by sdc_one_block_clusters (sd_compute_lt.cu) for the whole process. */
static int sd_lt_one_block;

/* The bf16 GEMM plans take only algorithms whose thread-block clusters are
 * one block (CUBLASLT_CLUSTER_SHAPE_1x1x1): after sdc_one_block_clusters,
 * which the engine calls when ddp tells it that PEs share its GPU and reduce
 * gradient buckets during backward, unless SYMDDP_CUDA_LT_NOCLUSTER=0; or
 * with SYMDDP_CUDA_LT_NOCLUSTER=1. With several PEs sharing a GPU under MPS
 * and buckets reduced during backward, the early PEs' parked barrier warps
 * can keep a slower PE's several-block cluster from being placed, and the
 * step hangs (issue 38, docs/GPU.md). */
static inline bool sd_lt_nocluster(void) {
    const char *v = getenv("SYMDDP_CUDA_LT_NOCLUSTER");
    if (v && v[0] == '0') return false;
    return sd_lt_one_block || (v && v[0] == '1');
}

/* The algorithm's configuration in words, for SYMDDP_CUDA_TUNE_LOG. */
static inline void sd_lt_describe(const cublasLtMatmulAlgo_t *a, char *buf, size_t n) {
    const cublasLtMatmulAlgoConfigAttributes_t attrs[] = {
        CUBLASLT_ALGO_CONFIG_ID,       CUBLASLT_ALGO_CONFIG_TILE_ID,          CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
        CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, CUBLASLT_ALGO_CONFIG_STAGES_ID};
    int32_t v[sizeof attrs / sizeof attrs[0]];
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        size_t got = 0;
        v[i] = -1;
        uint32_t u = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(a, attrs[i], &u, sizeof u, &got) == CUBLAS_STATUS_SUCCESS)
            v[i] = (int32_t)u;
    }
    snprintf(buf, n, "algo %d tile %d split-K %d reduction %d swizzle %d stages %d cluster %d", v[0], v[1], v[2],
             v[3], v[4], v[5], sd_lt_cluster(a));
}

static inline bool sd_lt_usable(const cublasLtMatmulHeuristicResult_t *r, size_t ws) {
    return r->state == CUBLAS_STATUS_SUCCESS && r->workspaceSize <= ws;
}

/*
 * Adds split-K variants of the heuristic's first usable candidates to res
 * (found of them, room for cap), each checked by cublasLtMatmulAlgoCheck
 * against the plan (desc and its layouts) and the workspace; returns the
 * new count. Only when the heuristic's own choice (res[first]) fills less than one wave of the GPU:
 * a GEMM with few output tiles (batch 256 against 256 or 784 outputs gives
 * 4 to 14 tiles of 128 x 128 on 132 SMs) then runs on a handful of SMs,
 * and splitting its k over more blocks is what fills the rest. Both
 * reduction schemes that keep the result deterministic for a fixed
 * algorithm are tried: in place (the output and counters in the workspace
 * order the parts; no extra kernel) and in the compute type (the parts in
 * the workspace, then a reduction kernel).
 */
static inline int sd_lt_split_variants(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                                       cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, uint64_t k, size_t ws,
                                       cublasLtMatmulHeuristicResult_t *res, int found, int first, int cap) {
    if (first < 0 || res[first].wavesCount >= 1.0f) return found;
    const uint32_t schemes[] = {CUBLASLT_REDUCTION_SCHEME_INPLACE, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE};
    int n = found, bases = 0;
    for (int i = 0; i < found && bases < SD_LT_SPLIT_BASES; i++) {
        if (!sd_lt_usable(&res[i], ws)) continue;
        int32_t can_split = 0, cur = 1;
        uint32_t mask = 0;
        size_t got = 0;
        if (cublasLtMatmulAlgoCapGetAttribute(&res[i].algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &can_split,
                                              sizeof can_split, &got) != CUBLAS_STATUS_SUCCESS ||
            !can_split ||
            cublasLtMatmulAlgoCapGetAttribute(&res[i].algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &mask,
                                              sizeof mask, &got) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &cur, sizeof cur,
                                                 &got) != CUBLAS_STATUS_SUCCESS ||
            cur > 1)
            continue; /* no split-K, or the heuristic split it already */
        bases++;
        for (size_t s = 0; s < sizeof sd_lt_splits / sizeof sd_lt_splits[0]; s++) {
            const int32_t split = sd_lt_splits[s];
            if (k / (uint64_t)split < SD_LT_MIN_SPLIT_K) break;
            for (size_t r = 0; r < sizeof schemes / sizeof schemes[0]; r++) {
                if (!(mask & schemes[r])) continue;
                if (n >= cap) return n;
                cublasLtMatmulHeuristicResult_t v;
                memset(&v, 0, sizeof v);
                v.algo = res[i].algo;
                if (cublasLtMatmulAlgoConfigSetAttribute(&v.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split,
                                                         sizeof split) != CUBLAS_STATUS_SUCCESS ||
                    cublasLtMatmulAlgoConfigSetAttribute(&v.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                         &schemes[r], sizeof schemes[r]) != CUBLAS_STATUS_SUCCESS ||
                    cublasLtMatmulAlgoCheck(lt, desc, la, lb, lc, lc, &v.algo, &v) !=
                        CUBLAS_STATUS_SUCCESS)
                    continue;
                v.state = CUBLAS_STATUS_SUCCESS;
                if (v.workspaceSize <= ws) res[n++] = v;
            }
        }
    }
    return n;
}
