/*
 * sd_compute_attention_cudnn.cu: the bf16 causal self-attention by cuDNN's
 * fused (flash) attention engines, reached through cuDNN's backend graph
 * API: SDC_ATTN_CUDNN of sdc_attention_bf16 (symddp_compute.h; its
 * launchers, which check the arguments, are in sd_compute_attention.cu).
 *
 * Why: on the H200 our mma.sync kernels take 135 + 428 us a layer at GPT-2's
 * shapes (B=16), cuDNN's wgmma kernels 87 + 282 us in PyTorch's compiled step
 * (docs/GPU.md); attention is the gap between our step and 1.1x torch.compile.
 *
 * How: the GPU host has cuDNN 9 (headers and libcudnn.so.9, in PyTorch's pip
 * environment) but not cudnn-frontend, so the two operation graphs that
 * cuDNN's SDPA engines recognise are written out here with the backend API,
 * one descriptor at a time. Layout (ours, as the other attention kernels,
 * an sdc_att_io): GPT-2's packed qkv (B,T,3C) or the grouped attention's q
 * (B,T,NH*HS), k and v (B,T,KVH*HS) bf16, out and dout (B,T,NH*HS) bf16, lse
 * (B,NH,T) fp32 natural-log logsumexp of the scaled scores; so cuDNN's
 * "stats" are our lse and the two implementations can be mixed (gptcheck
 * checks both ways).
 *
 * Grouped-query attention (KVH < NH key/value heads, query head h reading
 * key/value head h/(NH/KVH)): K and V are described with their KVH heads and
 * the products that read them (Q K^T, dO V^T, dS K) take them so, which
 * cuDNN's SDPA engines recognise as grouped (no copy of K or V); dK and dV
 * are the products dS^T Q and E^T dO over all NH query heads, a virtual
 * (B,NH,T,HS) tensor each, summed over each group by a reduction onto the
 * KVH heads, the graph cudnn-frontend writes for grouped attention.
 *
 * forward graph: S = Q K^T; S *= 1/sqrt(hs); causal mask (row index >= column
 * index, else the lowest float, by GEN_INDEX, CMP_GE, BINARY_SELECT); m = max
 * over the row; E = exp(S - m); l = sum E; lse = m + log l; P = E / l (bf16);
 * O = P V.
 * backward graph: Dsum = rowsum(dO * O); S as above, masked; E = exp(S - lse);
 * dV = E^T dO; dP = dO V^T; dS = E (dP - Dsum) / sqrt(hs); dK = dS^T Q; dQ =
 * dS K. Three forms of the dQ product (SYMDDP_CUDNN_BWD):
 *   det (default): dQ written by the product itself, the engine keeping dP
 *     in its workspace (B*NH*T*T bf16: 403 MB at GPT-2's B=16) and summing
 *     in a fixed order, the form cudnn-frontend takes for "deterministic":
 *     its bits repeat (gptcheck's timings compare 50 calls at B=16);
 *   accum2: dQ summed by the engine in an fp32 tensor of ours (zeroed here
 *     before each call) and cast by an IDENTITY, the row sum of dO * O a
 *     tensor of its own (the form of newer cudnn-frontends): 283 us against
 *     307 for det at B=16 on the H200, but its bits differ between calls
 *     (in 50 calls, all 49 after the first differed from it);
 *   accum: as accum2 with the fp32 dQ F16x16-reordered and the row sum
 *     virtual (older frontends); its bits differ between calls too.
 * Plans are built once per shape and form (sdc_attention_bf16_supported or
 * sdc_attention_backward_bf16_scratch_bytes, called before any step, so never
 * while a stream is captured) and kept for the life of the process; the
 * backward's workspace, Dsum and the fp32 dQ live in the caller's scratch.
 *
 * Built only when cuda/build.sh (or the check scripts) find cuDNN and define
 * SD_WITH_CUDNN; otherwise SDC_ATTN_CUDNN says it is not available.
 * SYMDDP_CUDNN_LOG=1 prints the engines tried and chosen to stderr.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_compute_attention.cuh"

#ifdef SD_WITH_CUDNN
#include <cudnn.h>

#include <float.h>
#include <mutex>

#define SDN_MAX_OPS 40

enum { SDN_BWD_DET = 0, SDN_BWD_ACCUM = 1, SDN_BWD_ACCUM2 = 2 };

/* uids of the tensors a variant pack names */
enum {
    SDN_Q = 1, SDN_K, SDN_V, SDN_O, SDN_STATS, SDN_DO, SDN_DQ, SDN_DK, SDN_DV, SDN_SCALE, SDN_NEGINF, SDN_ONE,
    SDN_DSUM, SDN_DQACC, SDN_FIRST_VIRTUAL = 100
};

/* One graph under construction: its operations and the first failure. The
 * descriptors made are never destroyed: a plan may refer to them, and plans
 * live as long as the process (one graph per shape and form). */
struct sdn_build {
    cudnnBackendDescriptor_t ops[SDN_MAX_OPS];
    int nops;
    int64_t next_uid;
    int failed;
    char why[640];
};

static void sdn_failf(sdn_build *b, const char *what, cudnnStatus_t st) {
    if (b->failed) return;
    b->failed = 1;
    char last[384] = "";
    cudnnGetLastErrorString(last, sizeof last);
    snprintf(b->why, sizeof b->why, "%s: %s%s%s", what, cudnnGetErrorString(st), last[0] ? ": " : "", last);
}

static cudnnBackendDescriptor_t sdn_new(sdn_build *b, cudnnBackendDescriptorType_t t) {
    if (b->failed) return NULL;
    cudnnBackendDescriptor_t d = NULL;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(t, &d);
    if (st != CUDNN_STATUS_SUCCESS) {
        sdn_failf(b, "cudnnBackendCreateDescriptor", st);
        return NULL;
    }
    return d;
}

#define SDN_SET(b, d, attr, type, n, p)                                                                  \
    do {                                                                                               \
        if (!(b)->failed) {                                                                            \
            cudnnStatus_t st_ = cudnnBackendSetAttribute((d), (attr), (type), (n), (p));              \
            if (st_ != CUDNN_STATUS_SUCCESS) sdn_failf((b), "set " #attr, st_);                        \
        }                                                                                              \
    } while (0)

static void sdn_fin(sdn_build *b, cudnnBackendDescriptor_t d, const char *what) {
    if (b->failed) return;
    cudnnStatus_t st = cudnnBackendFinalize(d);
    if (st != CUDNN_STATUS_SUCCESS) sdn_failf(b, what, st);
}

/* A 4-d tensor; uid 0 takes the next virtual uid. */
static cudnnBackendDescriptor_t sdn_tensor(sdn_build *b, int64_t uid, cudnnDataType_t dt, const int64_t dim[4],
                                           const int64_t stride[4], bool is_virtual, bool by_value = false,
                                           bool reorder16 = false) {
    cudnnBackendDescriptor_t t = sdn_new(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    if (!t) return NULL;
    if (uid == 0) uid = b->next_uid++;
    int64_t align = 16;
    SDN_SET(b, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    SDN_SET(b, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    SDN_SET(b, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    SDN_SET(b, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim);
    SDN_SET(b, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride);
    SDN_SET(b, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value) SDN_SET(b, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    if (reorder16) {
        cudnnBackendTensorReordering_t r = CUDNN_TENSOR_REORDERING_F16x16;
        SDN_SET(b, t, CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, 1, &r);
    }
    sdn_fin(b, t, "finalize tensor");
    return t;
}

/* An operation of type t whose attributes attr[i] are the descriptors d[i]
 * (NULL ones left unset), finalized and added to the graph. */
static void sdn_op(sdn_build *b, cudnnBackendDescriptorType_t t, int n, const cudnnBackendAttributeName_t *attr,
                   const cudnnBackendDescriptor_t *d, const char *what) {
    cudnnBackendDescriptor_t op = sdn_new(b, t);
    if (!op) return;
    for (int i = 0; i < n; i++)
        if (d[i]) SDN_SET(b, op, attr[i], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d[i]);
    sdn_fin(b, op, what);
    if (b->failed) return;
    if (b->nops >= SDN_MAX_OPS) {
        b->failed = 1;
        snprintf(b->why, sizeof b->why, "too many cuDNN operations");
        return;
    }
    b->ops[b->nops++] = op;
}

/* y = mode(x[, b2[, t]]) with the given compute type; axis >= 0 for GEN_INDEX */
static void sdn_pw(sdn_build *b, cudnnPointwiseMode_t mode, cudnnDataType_t prec, cudnnBackendDescriptor_t x,
                   cudnnBackendDescriptor_t b2, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
                   int64_t axis = -1) {
    cudnnBackendDescriptor_t pw = sdn_new(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    if (!pw) return;
    SDN_SET(b, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    SDN_SET(b, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (axis >= 0) SDN_SET(b, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    sdn_fin(b, pw, "finalize pointwise");
    const cudnnBackendAttributeName_t attr[] = {
        CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
        CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_ATTR_OPERATION_POINTWISE_TDESC,
        CUDNN_ATTR_OPERATION_POINTWISE_YDESC};
    const cudnnBackendDescriptor_t d[] = {pw, x, b2, t, y};
    sdn_op(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, 5, attr, d, "finalize pointwise operation");
}

static void sdn_matmul(sdn_build *b, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t bm,
                       cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t mm = sdn_new(b, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    if (!mm) return;
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    SDN_SET(b, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
    sdn_fin(b, mm, "finalize matmul");
    const cudnnBackendAttributeName_t attr[] = {CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_ATTR_OPERATION_MATMUL_BDESC,
                                                CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_ATTR_OPERATION_MATMUL_DESC};
    const cudnnBackendDescriptor_t d[] = {a, bm, c, mm};
    sdn_op(b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, 4, attr, d, "finalize matmul operation");
}

static void sdn_reduce(sdn_build *b, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x,
                       cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t rd = sdn_new(b, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    if (!rd) return;
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    SDN_SET(b, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how);
    SDN_SET(b, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
    sdn_fin(b, rd, "finalize reduction");
    const cudnnBackendAttributeName_t attr[] = {CUDNN_ATTR_OPERATION_REDUCTION_XDESC,
                                                CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
                                                CUDNN_ATTR_OPERATION_REDUCTION_DESC};
    const cudnnBackendDescriptor_t d[] = {x, y, rd};
    sdn_op(b, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, 3, attr, d, "finalize reduction operation");
}

static void sdn_reshape(sdn_build *b, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    const cudnnBackendAttributeName_t attr[] = {CUDNN_ATTR_OPERATION_RESHAPE_XDESC,
                                                CUDNN_ATTR_OPERATION_RESHAPE_YDESC};
    const cudnnBackendDescriptor_t d[] = {x, y};
    sdn_op(b, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, 2, attr, d, "finalize reshape operation");
}

static void sdn_dims(int64_t d[4], int64_t a, int64_t b2, int64_t c, int64_t e) {
    d[0] = a, d[1] = b2, d[2] = c, d[3] = e;
}

/* A shape, where its operands lie (an sdc_att_io's strides: q and dq rows
 * ldq apart, k, v, dk and dv rows ldkv apart, KVH = NH/grp key/value heads)
 * and the layouts of its virtual tensors: scores (B,NH,T,T) packed (sS) or
 * as their transpose (sSt), row values (B,NH,T,1). out and dout are
 * (B,T,C), C = NH*hs. */
struct sdn_shape {
    int64_t B, T, NH, KVH, hs, C, ldq, ldkv;
    int64_t dS[4], sS[4], sSt[4], dR[4], sR[4];
    sdn_shape(int64_t b, int64_t t, int64_t nh, int64_t kvh, int64_t h, int64_t lq, int64_t lkv)
        : B(b), T(t), NH(nh), KVH(kvh), hs(h), C(nh * h), ldq(lq), ldkv(lkv) {
        sdn_dims(dS, B, NH, T, T);
        sdn_dims(sS, NH * T * T, T * T, T, 1);
        sdn_dims(sSt, NH * T * T, T * T, 1, T);
        sdn_dims(dR, B, NH, T, 1);
        sdn_dims(sR, NH * T, T, 1, 1);
    }
    /* (B,heads,T,hs) rows ld apart, or transposed (B,heads,hs,T) */
    void rows(int64_t d[4], int64_t st[4], int64_t heads, int64_t ld) const {
        sdn_dims(d, B, heads, T, hs);
        sdn_dims(st, T * ld, hs, ld, 1);
    }
    void cols(int64_t d[4], int64_t st[4], int64_t heads, int64_t ld) const {
        sdn_dims(d, B, heads, hs, T);
        sdn_dims(st, T * ld, hs, 1, ld);
    }
    /* (B,NH,T,hs) packed, head after head (grouped dK and dV before their
     * reduction, the fp32 dQ of the accumulating forms) */
    void full(int64_t d[4], int64_t st[4]) const {
        sdn_dims(d, B, NH, T, hs);
        sdn_dims(st, NH * T * hs, T * hs, hs, 1);
    }
};

/* S = mask(Q K^T * scale), float, virtual */
static cudnnBackendDescriptor_t sdn_scores(sdn_build *b, const sdn_shape &s, cudnnBackendDescriptor_t q,
                                           cudnnBackendDescriptor_t kt, cudnnBackendDescriptor_t scale,
                                           cudnnBackendDescriptor_t neginf) {
    const int64_t *dS = s.dS, *sS = s.sS;
    cudnnBackendDescriptor_t s0 = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dS, sS, true);
    sdn_matmul(b, q, kt, s0);
    cudnnBackendDescriptor_t s1 = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s0, scale, NULL, s1);
    cudnnBackendDescriptor_t row = sdn_tensor(b, 0, CUDNN_DATA_INT32, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s1, NULL, NULL, row, 2);
    cudnnBackendDescriptor_t col = sdn_tensor(b, 0, CUDNN_DATA_INT32, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s1, NULL, NULL, col, 3);
    cudnnBackendDescriptor_t keep = sdn_tensor(b, 0, CUDNN_DATA_BOOLEAN, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, NULL, keep);
    cudnnBackendDescriptor_t s2 = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s1, neginf, keep, s2);
    return s2;
}

static void sdn_common(sdn_build *b, const sdn_shape &s, cudnnBackendDescriptor_t *q, cudnnBackendDescriptor_t *kt,
                       cudnnBackendDescriptor_t *stats, cudnnBackendDescriptor_t *scale,
                       cudnnBackendDescriptor_t *neginf) {
    int64_t d[4], st[4], one[4] = {1, 1, 1, 1};
    s.rows(d, st, s.NH, s.ldq);
    *q = sdn_tensor(b, SDN_Q, CUDNN_DATA_BFLOAT16, d, st, false);
    s.cols(d, st, s.KVH, s.ldkv);
    *kt = sdn_tensor(b, SDN_K, CUDNN_DATA_BFLOAT16, d, st, false);
    *stats = sdn_tensor(b, SDN_STATS, CUDNN_DATA_FLOAT, s.dR, s.sR, false);
    *scale = sdn_tensor(b, SDN_SCALE, CUDNN_DATA_FLOAT, one, one, false, true);
    *neginf = sdn_tensor(b, SDN_NEGINF, CUDNN_DATA_FLOAT, one, one, false, true);
}

static void sdn_forward_graph(sdn_build *b, const sdn_shape &s) {
    cudnnBackendDescriptor_t q, kt, stats, scale, neginf;
    sdn_common(b, s, &q, &kt, &stats, &scale, &neginf);
    const int64_t *dS = s.dS, *sS = s.sS, *dR = s.dR, *sR = s.sR;
    int64_t d[4], st[4];
    s.rows(d, st, s.KVH, s.ldkv);
    cudnnBackendDescriptor_t v = sdn_tensor(b, SDN_V, CUDNN_DATA_BFLOAT16, d, st, false);
    s.rows(d, st, s.NH, s.C);
    cudnnBackendDescriptor_t o = sdn_tensor(b, SDN_O, CUDNN_DATA_BFLOAT16, d, st, false);

    cudnnBackendDescriptor_t sc = sdn_scores(b, s, q, kt, scale, neginf);
    cudnnBackendDescriptor_t mx = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dR, sR, true);
    sdn_reduce(b, CUDNN_REDUCE_TENSOR_MAX, sc, mx);
    cudnnBackendDescriptor_t sub = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, sc, mx, NULL, sub);
    cudnnBackendDescriptor_t e = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, sub, NULL, NULL, e);
    cudnnBackendDescriptor_t sum = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dR, sR, true);
    sdn_reduce(b, CUDNN_REDUCE_TENSOR_ADD, e, sum);
    cudnnBackendDescriptor_t lg = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dR, sR, true);
    sdn_pw(b, CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, sum, NULL, NULL, lg);
    sdn_pw(b, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, mx, lg, NULL, stats);
    cudnnBackendDescriptor_t p = sdn_tensor(b, 0, CUDNN_DATA_BFLOAT16, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, sum, NULL, p);
    sdn_matmul(b, p, v, o);
}

/* y = a x for a key or value gradient: the product over the NH query heads,
 * and where KVH < NH (grouped attention) that product a virtual (B,NH,T,hs)
 * tensor summed over each group onto y's KVH heads by a reduction. */
static void sdn_kv_grad(sdn_build *b, const sdn_shape &s, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t x,
                        cudnnBackendDescriptor_t y) {
    if (s.KVH == s.NH) {
        sdn_matmul(b, a, x, y);
        return;
    }
    int64_t d[4], st[4];
    s.full(d, st);
    cudnnBackendDescriptor_t full = sdn_tensor(b, 0, CUDNN_DATA_BFLOAT16, d, st, true);
    sdn_matmul(b, a, x, full);
    sdn_reduce(b, CUDNN_REDUCE_TENSOR_ADD, full, y);
}

static void sdn_backward_graph(sdn_build *b, const sdn_shape &s, int variant) {
    cudnnBackendDescriptor_t q, kt, stats, scale, neginf;
    sdn_common(b, s, &q, &kt, &stats, &scale, &neginf);
    const int64_t *dS = s.dS, *sS = s.sS, *sSt = s.sSt, *dR = s.dR, *sR = s.sR;
    int64_t d[4], st[4], one4[4] = {1, 1, 1, 1};
    s.cols(d, st, s.KVH, s.ldkv);
    cudnnBackendDescriptor_t vt = sdn_tensor(b, SDN_V, CUDNN_DATA_BFLOAT16, d, st, false);
    s.rows(d, st, s.NH, s.C);
    cudnnBackendDescriptor_t o = sdn_tensor(b, SDN_O, CUDNN_DATA_BFLOAT16, d, st, false);
    cudnnBackendDescriptor_t dO = sdn_tensor(b, SDN_DO, CUDNN_DATA_BFLOAT16, d, st, false);
    s.rows(d, st, s.NH, s.ldq);
    cudnnBackendDescriptor_t dQ = sdn_tensor(b, SDN_DQ, CUDNN_DATA_BFLOAT16, d, st, false);
    s.rows(d, st, s.KVH, s.ldkv);
    cudnnBackendDescriptor_t dK = sdn_tensor(b, SDN_DK, CUDNN_DATA_BFLOAT16, d, st, false);
    cudnnBackendDescriptor_t dV = sdn_tensor(b, SDN_DV, CUDNN_DATA_BFLOAT16, d, st, false);
    cudnnBackendDescriptor_t one = sdn_tensor(b, SDN_ONE, CUDNN_DATA_FLOAT, one4, one4, false, true);
    int64_t dF[4], sF[4];
    s.full(dF, sF);

    /* Dsum = rowsum(dO * O) */
    int64_t sOO[4];
    sdn_dims(sOO, s.NH * s.T * s.hs, s.T * s.hs, s.NH * s.hs, 1);
    cudnnBackendDescriptor_t oo = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dF, sOO, true);
    sdn_pw(b, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dO, o, NULL, oo);
    cudnnBackendDescriptor_t rs = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dR, sR, true);
    sdn_reduce(b, CUDNN_REDUCE_TENSOR_ADD, oo, rs);
    cudnnBackendDescriptor_t dsum =
        sdn_tensor(b, variant == SDN_BWD_ACCUM2 ? SDN_DSUM : 0, CUDNN_DATA_FLOAT, dR, sR, variant != SDN_BWD_ACCUM2);
    sdn_pw(b, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, rs, one, NULL, dsum);

    /* E = exp(mask(S) - lse); dV = E^T dO */
    cudnnBackendDescriptor_t sc = sdn_scores(b, s, q, kt, scale, neginf);
    cudnnBackendDescriptor_t sm = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, sc, stats, NULL, sm);
    cudnnBackendDescriptor_t e = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, sm, NULL, NULL, e);
    cudnnBackendDescriptor_t et = sdn_tensor(b, 0, CUDNN_DATA_BFLOAT16, dS, sSt, true);
    sdn_reshape(b, e, et);
    sdn_kv_grad(b, s, et, dO, dV);

    /* dS = E (dO V^T - Dsum) scale */
    cudnnBackendDescriptor_t dp = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dS, sS, true);
    sdn_matmul(b, dO, vt, dp);
    if (variant != SDN_BWD_ACCUM2) {
        cudnnBackendDescriptor_t dp1 = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dS, sS, true);
        sdn_pw(b, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dp, one, NULL, dp1);
        dp = dp1;
    }
    cudnnBackendDescriptor_t dp2 = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, dp, dsum, NULL, dp2);
    cudnnBackendDescriptor_t ds0 = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dp2, e, NULL, ds0);
    cudnnBackendDescriptor_t ds = sdn_tensor(b, 0, CUDNN_DATA_FLOAT, dS, sS, true);
    sdn_pw(b, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, ds0, scale, NULL, ds);

    /* dK = dS^T Q */
    cudnnBackendDescriptor_t dst = sdn_tensor(b, 0, CUDNN_DATA_BFLOAT16, dS, sSt, true);
    sdn_reshape(b, ds, dst);
    sdn_kv_grad(b, s, dst, q, dK);

    /* dQ = dS K */
    int64_t dK4[4], sK4[4];
    s.rows(dK4, sK4, s.KVH, s.ldkv);
    cudnnBackendDescriptor_t k = sdn_tensor(b, 0, CUDNN_DATA_BFLOAT16, dK4, sK4, true);
    sdn_reshape(b, kt, k);
    if (variant == SDN_BWD_DET) {
        sdn_matmul(b, ds, k, dQ);
    } else {
        cudnnBackendDescriptor_t acc =
            sdn_tensor(b, SDN_DQACC, CUDNN_DATA_FLOAT, dF, sF, false, false, variant == SDN_BWD_ACCUM);
        sdn_matmul(b, ds, k, acc);
        sdn_pw(b, CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, acc, NULL, NULL, dQ);
    }
}

static int sdn_log_on(void) {
    const char *e = getenv("SYMDDP_CUDNN_LOG");
    return e && *e && strcmp(e, "0") != 0;
}

/* Operation graph, heuristics (mode A, then the fallback list), the first
 * engine configuration whose plan finalizes. */
static cudnnBackendDescriptor_t sdn_plan(sdn_build *b, cudnnHandle_t h, const char *name, int64_t *ws) {
    cudnnBackendDescriptor_t g = sdn_new(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    SDN_SET(b, g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    SDN_SET(b, g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, b->nops, b->ops);
    sdn_fin(b, g, "finalize operation graph");
    if (b->failed) return NULL;
    const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    char first[640] = "";
    for (int m = 0; m < 2; m++) {
        cudnnBackendDescriptor_t heur = sdn_new(b, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        SDN_SET(b, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
        SDN_SET(b, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m]);
        sdn_fin(b, heur, "finalize heuristics");
        if (b->failed) return NULL;
        int64_t n = 0;
        cudnnStatus_t st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL);
        if (st != CUDNN_STATUS_SUCCESS) {
            sdn_failf(b, "heuristics results", st);
            return NULL;
        }
        if (n > 16) n = 16;
        cudnnBackendDescriptor_t cfg[16];
        for (int64_t i = 0; i < n; i++) cfg[i] = sdn_new(b, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        if (b->failed) return NULL;
        int64_t got = 0;
        st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got,
                                      cfg);
        if (st != CUDNN_STATUS_SUCCESS) {
            sdn_failf(b, "heuristics results", st);
            return NULL;
        }
        for (int64_t i = 0; i < got; i++) {
            cudnnBackendDescriptor_t plan = sdn_new(b, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
            SDN_SET(b, plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
            SDN_SET(b, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]);
            if (b->failed) return NULL;
            st = cudnnBackendFinalize(plan);
            if (st != CUDNN_STATUS_SUCCESS) {
                if (!first[0]) {
                    char last[384] = "";
                    cudnnGetLastErrorString(last, sizeof last);
                    snprintf(first, sizeof first, "plan: %s%s%s", cudnnGetErrorString(st), last[0] ? ": " : "",
                             last);
                }
                if (sdn_log_on()) fprintf(stderr, "symddp cudnn %s: mode %d engine config %lld: %s\n", name, m,
                                          (long long)i, cudnnGetErrorString(st));
                continue;
            }
            *ws = 0;
            int64_t cnt = 0;
            cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &cnt, ws);
            if (sdn_log_on()) {
                int64_t idx = -1, nn = 0;
                cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
                cudnnBackendDescriptor_t eng = sdn_new(b, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
                if (eng &&
                    cudnnBackendGetAttribute(cfg[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                             &cnt, &eng) == CUDNN_STATUS_SUCCESS) {
                    cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &cnt, &idx);
                    if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &nn,
                                                 notes) != CUDNN_STATUS_SUCCESS)
                        nn = 0;
                }
                int nondet = 0;
                for (int64_t j = 0; j < nn; j++) nondet |= notes[j] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
                fprintf(stderr,
                        "symddp cudnn %s: mode %d engine config %lld (engine %lld, %lld numerical note(s)%s) chosen, "
                        "workspace %lld\n",
                        name, m, (long long)i, (long long)idx, (long long)nn, nondet ? ", NONDETERMINISTIC" : "",
                        (long long)*ws);
            }
            return plan;
        }
    }
    b->failed = 1;
    snprintf(b->why, sizeof b->why, "%s: no engine takes the graph%s%s", name, first[0] ? "; first refusal: " : "",
             first);
    return NULL;
}

/* ---- the per-shape cache ---- */
struct sdn_entry {
    int dev, B, T, NH, KVH, HS, ldq, ldkv, variant;
    cudnnHandle_t h; /* the device's handle the plans were built with */
    int ok;
    char why[700];
    cudnnBackendDescriptor_t fwd, bwd;
    int64_t fwd_ws_bytes, bwd_ws_bytes;
    void *fwd_ws;
};

#define SDN_CACHE 16
static sdn_entry g_sdn[SDN_CACHE];
static int g_sdn_n;
#define SDN_DEVICES 64
static cudnnHandle_t g_sdn_handles[SDN_DEVICES]; /* one per device, made on first use */
static std::mutex g_sdn_mu;
static const float g_sdn_neginf = -FLT_MAX, g_sdn_one = 1.f;

static int sdn_variant(void) {
    const char *e = getenv("SYMDDP_CUDNN_BWD");
    if (e && !strcmp(e, "accum")) return SDN_BWD_ACCUM;
    if (e && !strcmp(e, "accum2")) return SDN_BWD_ACCUM2;
    return SDN_BWD_DET;
}

static size_t sdn_align(size_t n) { return (n + 255) & ~(size_t)255; }

/* bytes of the backward's scratch: workspace, Dsum, the fp32 dQ */
static size_t sdn_bwd_scratch(const sdn_entry *e) {
    size_t n = 256 + sdn_align((size_t)e->bwd_ws_bytes); /* 256: the scratch's start aligned up */
    n += sdn_align((size_t)e->B * e->NH * e->T * sizeof(float));
    if (e->variant != SDN_BWD_DET) n += sdn_align((size_t)e->B * e->NH * e->T * e->HS * sizeof(float));
    return n;
}

static void sdn_build_entry(sdn_entry *e) {
    if (e->dev < 0 || e->dev >= SDN_DEVICES) {
        snprintf(e->why, sizeof e->why, "cuDNN attention: device %d", e->dev);
        return;
    }
    if (!g_sdn_handles[e->dev]) {
        cudnnStatus_t st = cudnnCreate(&g_sdn_handles[e->dev]);
        if (st != CUDNN_STATUS_SUCCESS) {
            g_sdn_handles[e->dev] = NULL;
            snprintf(e->why, sizeof e->why, "cudnnCreate: %s", cudnnGetErrorString(st));
            return;
        }
    }
    e->h = g_sdn_handles[e->dev];
    const sdn_shape s(e->B, e->T, e->NH, e->KVH, e->HS, e->ldq, e->ldkv);
    sdn_build *fb = (sdn_build *)calloc(1, sizeof(sdn_build)), *bb = (sdn_build *)calloc(1, sizeof(sdn_build));
    if (!fb || !bb) {
        free(fb), free(bb);
        snprintf(e->why, sizeof e->why, "out of host memory");
        return;
    }
    fb->next_uid = bb->next_uid = SDN_FIRST_VIRTUAL;
    sdn_forward_graph(fb, s);
    e->fwd = sdn_plan(fb, e->h, "forward", &e->fwd_ws_bytes);
    if (!fb->failed) {
        sdn_backward_graph(bb, s, e->variant);
        e->bwd = sdn_plan(bb, e->h, "backward", &e->bwd_ws_bytes);
    }
    if (fb->failed || bb->failed) {
        snprintf(e->why, sizeof e->why, "cuDNN attention %s graph: %s", fb->failed ? "forward" : "backward",
                 fb->failed ? fb->why : bb->why);
    } else if (e->fwd_ws_bytes > 0 && cudaMalloc(&e->fwd_ws, (size_t)e->fwd_ws_bytes) != cudaSuccess) {
        cudaGetLastError();
        snprintf(e->why, sizeof e->why, "cuDNN attention: no room for the forward's %lld-byte workspace",
                 (long long)e->fwd_ws_bytes);
    } else {
        e->ok = 1;
    }
    if (!e->ok && sdn_log_on()) fprintf(stderr, "symddp cudnn: not taken: %s\n", e->why);
    /* the descriptors stay alive with the plans (the graphs are small) */
    free(fb);
    free(bb);
}

/* The entry for this shape, layout and the current backward form, built on
 * first use. */
static sdn_entry *sdn_get(const sdc_att_io &io, int B, int T, int HS, bool may_build) {
    const int variant = sdn_variant();
    const int NH = io.NH, KVH = io.grp > 0 ? io.NH / io.grp : 0;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    std::lock_guard<std::mutex> lk(g_sdn_mu);
    for (int i = 0; i < g_sdn_n; i++) {
        sdn_entry *e = &g_sdn[i];
        if (e->dev == dev && e->B == B && e->T == T && e->NH == NH && e->KVH == KVH && e->HS == HS &&
            e->ldq == io.ldq && e->ldkv == io.ldkv && e->variant == variant)
            return e;
    }
    if (!may_build || g_sdn_n == SDN_CACHE) return NULL;
    sdn_entry *e = &g_sdn[g_sdn_n++];
    memset(e, 0, sizeof *e);
    e->dev = dev, e->B = B, e->T = T, e->NH = NH, e->KVH = KVH, e->HS = HS, e->ldq = io.ldq, e->ldkv = io.ldkv;
    e->variant = variant;
    if (B <= 0 || T <= 0 || NH <= 0 || KVH <= 0 || NH % KVH != 0 || HS % 8 != 0 || HS > 128 || HS <= 0)
        snprintf(e->why, sizeof e->why, "cuDNN attention: B=%d T=%d NH=%d KVH=%d HS=%d not supported", B, T, NH, KVH,
                 HS);
    else
        sdn_build_entry(e);
    return e;
}

static int sdn_exec(sdn_entry *e, cudnnBackendDescriptor_t plan, int n, const int64_t *uids, void **ptrs, void *ws,
                    cudaStream_t stream, const char *what) {
    cudnnStatus_t st = cudnnSetStream(e->h, stream);
    if (st != CUDNN_STATUS_SUCCESS) return SD_FAIL(SD_ERR, "%s: cudnnSetStream: %s", what, cudnnGetErrorString(st));
    cudnnBackendDescriptor_t vp = NULL;
    st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(vp);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(e->h, plan, vp);
    if (vp) cudnnBackendDestroyDescriptor(vp);
    if (st != CUDNN_STATUS_SUCCESS) {
        char last[384] = "";
        cudnnGetLastErrorString(last, sizeof last);
        return SD_FAIL(SD_ERR, "%s: %s%s%s", what, cudnnGetErrorString(st), last[0] ? ": " : "", last);
    }
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

int sdc_att_cudnn_supported(const sdc_att_io &io, int B, int T, int HS) {
    sdn_entry *e = sdn_get(io, B, T, HS, true);
    return e && e->ok;
}

int sdc_att_use_cudnn(const sdc_att_io &io, int B, int T, int HS, cudaStream_t stream) {
    const int mode = sdc_att_mode();
    if (mode == SDC_ATT_MODE_OWN) return 0;
    if (mode == SDC_ATT_MODE_CUDNN) return 1;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(stream, &cs);
    sdn_entry *e = sdn_get(io, B, T, HS, cs == cudaStreamCaptureStatusNone);
    return e && e->ok;
}

size_t sdc_att_cudnn_scratch_bytes(const sdc_att_io &io, int B, int T, int HS) {
    sdn_entry *e = sdn_get(io, B, T, HS, true);
    return e && e->ok ? sdn_bwd_scratch(e) : 0;
}

static sdn_entry *sdn_ready(const char *what, const sdc_att_io &io, int B, int T, int HS, cudaStream_t s, int *rc) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(s, &cs);
    sdn_entry *e = sdn_get(io, B, T, HS, cs == cudaStreamCaptureStatusNone);
    if (!e) {
        *rc = SD_FAIL(SD_ERR_ARG,
                      "%s: no cuDNN plan for B=%d T=%d NH=%d KVH=%d HS=%d and the stream is being captured "
                      "(call the backward's scratch query first)",
                      what, B, T, io.NH, io.grp > 0 ? io.NH / io.grp : 0, HS);
        return NULL;
    }
    if (!e->ok) {
        *rc = SD_FAIL(SD_ERR_ARG, "%s: %s", what, e->why);
        return NULL;
    }
    return e;
}

int sdc_att_cudnn_forward(const char *call, void *out, float *lse, const sdc_att_io &io, int B, int T, int HS,
                          cudaStream_t s) {
    char what[96];
    snprintf(what, sizeof what, "%s (cudnn)", call);
    int rc = SD_OK;
    sdn_entry *e = sdn_ready(what, io, B, T, HS, s, &rc);
    if (!e) return rc;
    const float scale = 1.f / sqrtf((float)HS);
    const int64_t uids[] = {SDN_Q, SDN_K, SDN_V, SDN_O, SDN_STATS, SDN_SCALE, SDN_NEGINF};
    void *ptrs[] = {(void *)io.q, (void *)io.k, (void *)io.v, out, lse, (void *)&scale, (void *)&g_sdn_neginf};
    return sdn_exec(e, e->fwd, 7, uids, ptrs, e->fwd_ws, s, what);
}

int sdc_att_cudnn_backward(const char *call, const sdc_att_io &io, const void *dout, const void *out,
                           const float *lse, int B, int T, int HS, void *scratch, cudaStream_t s) {
    char what[96];
    snprintf(what, sizeof what, "%s (cudnn)", call);
    int rc = SD_OK;
    sdn_entry *e = sdn_ready(what, io, B, T, HS, s, &rc);
    if (!e) return rc;
    const int NH = io.NH;
    const float scale = 1.f / sqrtf((float)HS);
    char *ws = (char *)(((uintptr_t)scratch + 255) & ~(uintptr_t)255);
    char *dsum = ws + sdn_align((size_t)e->bwd_ws_bytes);
    char *acc = dsum + sdn_align((size_t)B * NH * T * sizeof(float));
    if (e->variant != SDN_BWD_DET) /* the engine adds into it */
        SD_CUDA(cudaMemsetAsync(acc, 0, (size_t)B * NH * T * HS * sizeof(float), s));
    int64_t uids[16] = {SDN_Q, SDN_K, SDN_V, SDN_O, SDN_DO, SDN_STATS, SDN_DQ, SDN_DK, SDN_DV, SDN_SCALE,
                        SDN_NEGINF, SDN_ONE};
    void *ptrs[16] = {(void *)io.q, (void *)io.k, (void *)io.v, (void *)out,     (void *)dout,
                      (void *)lse,  io.dq,        io.dk,        io.dv,           (void *)&scale,
                      (void *)&g_sdn_neginf,      (void *)&g_sdn_one};
    int n = 12;
    if (e->variant == SDN_BWD_ACCUM2) uids[n] = SDN_DSUM, ptrs[n++] = dsum;
    if (e->variant != SDN_BWD_DET) uids[n] = SDN_DQACC, ptrs[n++] = acc;
    return sdn_exec(e, e->bwd, n, uids, ptrs, ws, s, what);
}

#endif /* SD_WITH_CUDNN */

/* SYMDDP_ATTENTION: auto (or unset), cudnn, own */
int sdc_att_mode(void) {
    const char *e = getenv("SYMDDP_ATTENTION");
    if (!e || !*e || !strcmp(e, "auto")) return SDC_ATT_MODE_AUTO;
    if (!strcmp(e, "cudnn")) return SDC_ATT_MODE_CUDNN;
    return SDC_ATT_MODE_OWN;
}

#ifndef SD_WITH_CUDNN

int sdc_att_use_cudnn(const sdc_att_io &io, int B, int T, int HS, cudaStream_t stream) {
    (void)io, (void)B, (void)T, (void)HS, (void)stream;
    return sdc_att_mode() == SDC_ATT_MODE_CUDNN; /* so that the cuDNN launcher says why not */
}

int sdc_att_cudnn_supported(const sdc_att_io &io, int B, int T, int HS) {
    (void)io, (void)B, (void)T, (void)HS;
    return 0;
}

size_t sdc_att_cudnn_scratch_bytes(const sdc_att_io &io, int B, int T, int HS) {
    (void)io, (void)B, (void)T, (void)HS;
    return 0;
}

int sdc_att_cudnn_forward(const char *call, void *out, float *lse, const sdc_att_io &io, int B, int T, int HS,
                          cudaStream_t s) {
    (void)out, (void)lse, (void)io, (void)B, (void)T, (void)HS, (void)s;
    return SD_FAIL(SD_ERR_ARG, "%s (cudnn): this library was built without cuDNN "
                               "(cuda/build.sh found no cudnn.h; set CUDNN_HOME)", call);
}

int sdc_att_cudnn_backward(const char *call, const sdc_att_io &io, const void *dout, const void *out,
                           const float *lse, int B, int T, int HS, void *scratch, cudaStream_t s) {
    (void)io, (void)dout, (void)out, (void)lse, (void)B, (void)T, (void)HS, (void)scratch, (void)s;
    return SD_FAIL(SD_ERR_ARG, "%s (cudnn): this library was built without cuDNN "
                               "(cuda/build.sh found no cudnn.h; set CUDNN_HOME)", call);
}

#endif /* SD_WITH_CUDNN */
