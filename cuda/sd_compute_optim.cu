/*
 * sd_compute_optim.cu: the optimizer step over a whole arena, in two
 * kernels.
 *
 * 1. The gradient check: the sum of squares of grads (n) in double with a
 *    fixed order (sd_reduce.cuh: per-thread strided sums, a halving tree per
 *    block, the last block adds the partials the same way) or, for the
 *    sharded update, the sum of the PEs' sums of squares of their shards
 *    (nparts doubles, added from 0.0 in PE order by one thread, as ddp's
 *    host path adds them), then in one thread the verdict (sdc_verdict):
 *      skip  = the sum is not finite (some gradient is NaN or Inf), or a
 *              halt is latched;
 *      scale = float32(max_norm / (norm + 1e-6)) when max_norm > 0 and
 *              norm > max_norm (optim.ClipFactor), 1 otherwise;
 *    written to the status words (SDC_STATUS_*). A sum of squares of float32
 *    values cannot overflow double, so "finite" means every gradient is.
 * 2. The update: one thread per float4 of the arena (and a scalar tail),
 *    returning at once when the status says skip. Each element performs
 *    exactly the float32 operations of optim's doc comments, in order, each
 *    rounded to nearest: __fmul_rn / __fadd_rn / __fsub_rn are never
 *    contracted into FMAs, __fdiv_rn and __fsqrt_rn are IEEE. Clipping
 *    multiplies the gradient by scale first, as optim.Scale does (x*1 is x).
 *
 * Per-step values (lr, Adam's step size and bias correction, AdamW's decay,
 * whether this is step 1) come by value, or from the step block when the
 * kernels are recorded into a CUDA graph.
 */
#include <math.h>
#include <string.h>

#include "sd_bf16.cuh"
#include "sd_compute.cuh"
#include "sd_internal.h"
#include "sd_reduce.cuh"
#include "symddp_compute.h"
#include "sd_step_node.cuh"

#define SDC_OPT_THREADS 256
/* Counter 2 is the gradient check's ticket. */
#define SDC_NORM_COUNTER 2

/* ---- 1. gradient check ---- */

/* The verdict of the gradient check on the global sum of squares, into the
 * status words: the one rule of both check kernels. */
static __device__ void sdc_verdict(double sum, float max_norm, int32_t halt_on_skip, float *status) {
    const double norm = sqrt(sum);
    const bool halted = status[SDC_STATUS_HALTED] != 0.0f;
    const bool finite = isfinite(sum);
    const bool skip = halted || !finite;
    float scale = 1.0f;
    if (max_norm > 0.0f && norm > (double)max_norm) scale = (float)((double)max_norm / (norm + 1e-6));
    status[SDC_STATUS_SKIPPED] = skip ? 1.0f : 0.0f;
    status[SDC_STATUS_SCALE] = scale;
    status[SDC_STATUS_NORM] = (float)norm;
    status[SDC_STATUS_HALTED] = (halted || (skip && halt_on_skip)) ? 1.0f : 0.0f;
}

/* The check over the whole arena: its own sum of squares. */
__global__ void __launch_bounds__(SDC_SUMSQ_THREADS)
    sdc_grad_check_kernel(const float *__restrict__ g, int64_t n, double *partial,
                          uint32_t *ticket_word, float max_norm, int32_t halt_on_skip,
                          float *status) {
    sdc_wait_prior_grid();
    __shared__ double s[32];
    double sum;
    if (!sdc_sum_squares_grid(g, n, partial, ticket_word, s, &sum)) return;
    sdc_verdict(sum, max_norm, halt_on_skip, status);
}

/* The check of the sharded update, one thread: the doubles at parts,
 * parts + stride, ... (bytes), added from 0.0 in that order. */
__global__ void sdc_parts_check_kernel(const char *parts, int32_t nparts, int64_t stride, float max_norm,
                                       int32_t halt_on_skip, float *status) {
    sdc_wait_prior_grid();
    double sum = 0.0;
    for (int32_t k = 0; k < nparts; k++) sum += __ldcg((const double *)(parts + (int64_t)k * stride));
    sdc_verdict(sum, max_norm, halt_on_skip, status);
}

/* ---- 2. the updates, element by element ---- */

/* What every update kernel gets: fixed hyperparameters and the step's values. */
struct sdc_update_args {
    sdc_optim o;
    sdc_step v;           /* by value (eager) */
    const sdc_step *blk;  /* or the step block (captured), when not NULL */
    const float *status;  /* the gradient check's verdict */
    const uint8_t *exempt; /* n bytes, 1: no weight decay for that element (NULL: none exempt) */
    uint16_t *copy;        /* the bf16 copy of element copy_lo (NULL: none written) */
    int64_t copy_lo, copy_n; /* the elements [copy_lo, copy_lo + copy_n) that have one */
    uint32_t *copy_flag;   /* set to 1 once the copy is current (NULL: none) */
    bool copy_vec;         /* copy 8-byte aligned and copy_lo a multiple of 4: a vector's copies in one store */
};

/* Element i's bf16 copy, where it has one: p rounded as sdc_cast_bf16 rounds. */
static __device__ __forceinline__ void sdc_copy_bf16(const sdc_update_args &a, int64_t i, float p) {
    const uint64_t k = (uint64_t)(i - a.copy_lo);
    if (a.copy && k < (uint64_t)a.copy_n) a.copy[k] = sdc_bf16_rn(p);
}

/* The clipped gradient: g * scale when clipping is on (exactly g when scale is 1). */
static __device__ __forceinline__ float sdc_clip(float g, bool clip, float scale) {
    return clip ? __fmul_rn(g, scale) : g;
}

/*
 * optim.SGD:
 *   g = g + float32(wd*p)              if wd != 0
 *   buf = g (step 1) | float32(mu*buf) + g       (mu > 0)
 *   d = g + float32(mu*buf) (Nesterov) | buf | g (mu = 0)
 *   p = p - float32(lr*d)
 */
static __device__ __forceinline__ void sdc_sgd(float &p, float g, float &buf, bool has_buf,
                                               const sdc_optim &o, float l2, float lr, bool first) {
    if (l2 != 0.0f) g = __fadd_rn(g, __fmul_rn(l2, p));
    float d = g;
    if (has_buf) {
        const float b = first ? g : __fadd_rn(__fmul_rn(o.momentum, buf), g);
        buf = b;
        d = o.nesterov ? __fadd_rn(g, __fmul_rn(o.momentum, b)) : b;
    }
    p = __fsub_rn(p, __fmul_rn(lr, d));
}

/*
 * optim.Adam and optim.AdamW (l2 = 0, decay from the step):
 *   p = float32(p*decay)
 *   g = g + float32(l2*p)                             if l2 != 0
 *   m = float32(b1*m) + float32(c1*g)
 *   v = float32(b2*v) + float32(float32(c2*g)*g)
 *   den = float32(sqrt(v)) / bc2 + eps
 *   p = p - float32(step_size*m) / den
 * with m = v = 0 before step 1.
 */
static __device__ __forceinline__ void sdc_adam(float &p, float g, float &m, float &v,
                                                const sdc_optim &o, float l2, float decay, const sdc_step &s) {
    const float pi = __fmul_rn(p, decay);
    if (l2 != 0.0f) g = __fadd_rn(g, __fmul_rn(l2, pi));
    const float m0 = s.first ? 0.0f : m, v0 = s.first ? 0.0f : v;
    const float mi = __fadd_rn(__fmul_rn(o.beta1, m0), __fmul_rn(o.c1, g));
    const float vi = __fadd_rn(__fmul_rn(o.beta2, v0), __fmul_rn(__fmul_rn(o.c2, g), g));
    m = mi;
    v = vi;
    const float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), o.eps);
    p = __fsub_rn(pi, __fdiv_rn(__fmul_rn(s.step_size, mi), den));
}

/* One element i of the arena. */
template <int KIND>
static __device__ __forceinline__ void sdc_update_one(float *p, const float *g, float *s0, float *s1,
                                                      int64_t i, const sdc_update_args &a,
                                                      const sdc_step &s, bool clip, float scale) {
    float pi = p[i];
    const float gi = sdc_clip(g[i], clip, scale);
    const bool ex = a.exempt && a.exempt[i];
    const float l2 = (KIND == SDC_ADAMW || ex) ? 0.0f : a.o.weight_decay;
    if (KIND == SDC_SGD) {
        float b = s0 ? s0[i] : 0.0f;
        sdc_sgd(pi, gi, b, s0 != NULL, a.o, l2, s.lr, s.first != 0);
        if (s0) s0[i] = b;
    } else {
        float m = s0[i], v = s1[i];
        sdc_adam(pi, gi, m, v, a.o, l2, ex ? 1.0f : s.decay, s);
        s0[i] = m;
        s1[i] = v;
    }
    p[i] = pi;
    sdc_copy_bf16(a, i, pi);
}

/* One float4 vector of the arena in registers: loaded, updated element by
 * element as sdc_update_one does, stored (with its bf16 copy). */
template <int KIND>
struct sdc_vec4_state {
    float pe[4], ge[4], me[4], ve[4];
    bool exk[4];
    __device__ __forceinline__ void load(const float *p, const float *g, const float *s0, const float *s1,
                                         const uint8_t *exempt, int64_t i) {
        const float4 pv = ((const float4 *)p)[i], gv = ((const float4 *)g)[i];
        const float4 m = s0 ? ((const float4 *)s0)[i] : make_float4(0, 0, 0, 0);
        const float4 v = s1 ? ((const float4 *)s1)[i] : make_float4(0, 0, 0, 0);
        const uchar4 ex = exempt ? ((const uchar4 *)exempt)[i] : make_uchar4(0, 0, 0, 0);
        pe[0] = pv.x, pe[1] = pv.y, pe[2] = pv.z, pe[3] = pv.w;
        ge[0] = gv.x, ge[1] = gv.y, ge[2] = gv.z, ge[3] = gv.w;
        me[0] = m.x, me[1] = m.y, me[2] = m.z, me[3] = m.w;
        ve[0] = v.x, ve[1] = v.y, ve[2] = v.z, ve[3] = v.w;
        exk[0] = ex.x != 0, exk[1] = ex.y != 0, exk[2] = ex.z != 0, exk[3] = ex.w != 0;
    }
    __device__ __forceinline__ void apply(const sdc_update_args &a, const sdc_step &s, bool clip, float scale,
                                          bool has_s0) {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float gk = sdc_clip(ge[k], clip, scale);
            const float l2 = (KIND == SDC_ADAMW || exk[k]) ? 0.0f : a.o.weight_decay;
            if (KIND == SDC_SGD)
                sdc_sgd(pe[k], gk, me[k], has_s0, a.o, l2, s.lr, s.first != 0);
            else
                sdc_adam(pe[k], gk, me[k], ve[k], a.o, l2, exk[k] ? 1.0f : s.decay, s);
        }
    }
    __device__ __forceinline__ void store(float *p, float *s0, float *s1, const sdc_update_args &a, int64_t i) const {
        ((float4 *)p)[i] = make_float4(pe[0], pe[1], pe[2], pe[3]);
        const uint64_t k = (uint64_t)(4 * i - a.copy_lo);
        if (a.copy_vec && k + 3 < (uint64_t)a.copy_n) { /* the four copies in one 8-byte store */
            uint2 w;
            w.x = (uint32_t)sdc_bf16_rn(pe[0]) | (uint32_t)sdc_bf16_rn(pe[1]) << 16;
            w.y = (uint32_t)sdc_bf16_rn(pe[2]) | (uint32_t)sdc_bf16_rn(pe[3]) << 16;
            *(uint2 *)(a.copy + k) = w;
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++) sdc_copy_bf16(a, 4 * i + j, pe[j]);
        }
        if (s0) ((float4 *)s0)[i] = make_float4(me[0], me[1], me[2], me[3]);
        if (s1) ((float4 *)s1)[i] = make_float4(ve[0], ve[1], ve[2], ve[3]);
    }
};

/*
 * params, grads, state (n): thread t of the grid updates float4 vectors
 * t, t+stride, ... of the first n4, two at a time (when every pointer is
 * 16-byte aligned), then elements n4*4 + t, ... of the tail, each exactly as
 * sdc_update_one.
 */
template <int KIND>
__global__ void __launch_bounds__(SDC_OPT_THREADS)
    sdc_update_kernel(float *__restrict__ p, const float *__restrict__ g, float *__restrict__ s0,
                      float *__restrict__ s1, int64_t n, int64_t n4, sdc_update_args a) {
    sdc_wait_prior_grid();
    /* Skipped or not, the copy is current after the update: the forward
     * that came before it cast or found it current, and a skipped step
     * changes no parameter. */
    if (a.copy_flag && blockIdx.x == 0 && threadIdx.x == 0) *a.copy_flag = 1;
    if (a.status[SDC_STATUS_SKIPPED] != 0.0f) return;
    const sdc_step s = a.blk ? *a.blk : a.v;
    const bool clip = a.o.max_norm > 0.0f;
    const float scale = a.status[SDC_STATUS_SCALE];
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    /* two vectors a turn, i and i + stride, loaded before either is used:
     * twice the loads in flight (each element's operations unchanged) */
    for (int64_t i = t; i < n4; i += 2 * stride) {
        sdc_vec4_state<KIND> u[2];
        const bool two = i + stride < n4;
        u[0].load(p, g, s0, s1, a.exempt, i);
        if (two) u[1].load(p, g, s0, s1, a.exempt, i + stride);
        u[0].apply(a, s, clip, scale, s0 != NULL);
        u[0].store(p, s0, s1, a, i);
        if (two) {
            u[1].apply(a, s, clip, scale, s0 != NULL);
            u[1].store(p, s0, s1, a, i + stride);
        }
    }
    for (int64_t i = n4 * 4 + t; i < n; i += stride) sdc_update_one<KIND>(p, g, s0, s1, i, a, s, clip, scale);
}

/* The update kernels' step values: in their sdc_update_args (argument 6),
 * by value, no block. */
static void sdc_update_set_values(sdc_step_node *n, const sdc_step *v) {
    sdc_update_args *a = (sdc_update_args *)n->argv[6];
    a->v = *v;
    a->blk = NULL;
}

bool sdc_update_step_node(const cudaKernelNodeParams *p, sdc_step_node *out) {
    if (p->func != (void *)sdc_update_kernel<SDC_SGD> && p->func != (void *)sdc_update_kernel<SDC_ADAM> &&
        p->func != (void *)sdc_update_kernel<SDC_ADAMW>)
        return false;
    const size_t sizes[] = {sizeof(float *), sizeof(const float *), sizeof(float *), sizeof(float *),
                            sizeof(int64_t), sizeof(int64_t), sizeof(sdc_update_args)};
    /* Only a node recorded reading the block: one captured with values by
     * argument keeps them. */
    return p->kernelParams && ((const sdc_update_args *)p->kernelParams[6])->blk &&
           sdc_step_node_fill(p, out, sizes, (int)(sizeof sizes / sizeof sizes[0]), sdc_update_set_values);
}

extern "C" int sdc_update(const sdc_ctx *c, const sdc_optim *o, const sdc_step *step,
                          int32_t use_block, uint64_t params, uint64_t grads, uint64_t state0,
                          uint64_t state1, uint64_t exempt, int64_t n, uint64_t partials, int32_t nparts,
                          int64_t part_stride, uint64_t copy, int64_t copy_lo, int64_t copy_n, uint64_t copy_flag) {
    if (!c || !o || !step || n < 0) return SD_FAIL(SD_ERR_ARG, "sdc_update: bad arguments");
    if (copy ? copy % 2 || copy_lo < 0 || copy_n < 1 || copy_lo > n - copy_n || partials || copy_flag % 4
             : copy_lo || copy_n || copy_flag)
        return SD_FAIL(SD_ERR_ARG, "sdc_update: a bf16 copy at %#llx of elements [%lld, +%lld) of %lld, flag %#llx%s",
                       (unsigned long long)copy, (long long)copy_lo, (long long)copy_n, (long long)n,
                       (unsigned long long)copy_flag, partials ? " (a shard's update writes none)" : "");
    const bool adam = o->kind == SDC_ADAM || o->kind == SDC_ADAMW;
    if (o->kind != SDC_SGD && !adam) return SD_FAIL(SD_ERR_ARG, "sdc_update: unknown optimizer kind %d", o->kind);
    if (adam && (!state0 || !state1)) return SD_FAIL(SD_ERR_ARG, "sdc_update: Adam needs two state slots");
    if (o->kind == SDC_SGD && (o->momentum != 0.0f) != (state0 != 0))
        return SD_FAIL(SD_ERR_ARG, "sdc_update: SGD with momentum %g and %s state slot", (double)o->momentum,
                       state0 ? "a" : "no");
    if (partials ? nparts < 1 || partials % sizeof(double) != 0 || part_stride % (int64_t)sizeof(double) != 0 ||
                       (nparts > 1 && part_stride < (int64_t)sizeof(double))
                 : nparts != 0 || part_stride != 0)
        return SD_FAIL(SD_ERR_ARG, "sdc_update: %d partial sums at %#llx, %lld bytes apart", (int)nparts,
                       (unsigned long long)partials, (long long)part_stride);
    /* A shard may be empty; its PE still writes the verdict all PEs share. */
    if (n == 0 && !partials) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    cudaStream_t st = (cudaStream_t)(uintptr_t)c->stream;
    float *status = (float *)(uintptr_t)c->status;

    /* 1. The gradient check. */
    if (partials)
        SD_CUDA(sdc_launch(sdc_parts_check_kernel, dim3(1), dim3(1), st, (const char *)(uintptr_t)partials, nparts,
                           part_stride, o->max_norm, o->halt_on_skip, status));
    else
        SD_CUDA(sdc_launch(sdc_grad_check_kernel, dim3(sdc_sum_squares_blocks(c, n)), dim3(SDC_SUMSQ_THREADS), st,
                           (const float *)(uintptr_t)grads, n, (double *)(uintptr_t)c->scratch,
                           (uint32_t *)(uintptr_t)c->counters + SDC_NORM_COUNTER, o->max_norm, o->halt_on_skip,
                           status));
    if (n == 0) return SD_OK;

    /* 2. The update. */
    sdc_update_args a;
    a.o = *o;
    a.v = *step;
    a.blk = use_block ? (const sdc_step *)(uintptr_t)c->step : NULL;
    a.status = status;
    a.exempt = (const uint8_t *)(uintptr_t)exempt;
    a.copy = (uint16_t *)(uintptr_t)copy;
    a.copy_lo = copy_lo;
    a.copy_n = copy_n;
    a.copy_flag = (uint32_t *)(uintptr_t)copy_flag;
    a.copy_vec = copy % 8 == 0 && copy_lo % 4 == 0;
    const bool aligned = (params | grads | state0 | state1) % 16 == 0 && exempt % 4 == 0;
    const int64_t n4 = aligned ? n / 4 : 0;
    const int64_t g2 = sdc_grid(n4 ? n4 : n, SDC_OPT_THREADS, c->sm_count, 16);
    float *p = (float *)(uintptr_t)params, *s0 = (float *)(uintptr_t)state0, *s1 = (float *)(uintptr_t)state1;
    const float *g = (const float *)(uintptr_t)grads;
    const dim3 grid((unsigned)g2), block(SDC_OPT_THREADS);
    switch (o->kind) {
    case SDC_SGD: SD_CUDA(sdc_launch(sdc_update_kernel<SDC_SGD>, grid, block, st, p, g, s0, (float *)NULL, n, n4, a)); break;
    case SDC_ADAM: SD_CUDA(sdc_launch(sdc_update_kernel<SDC_ADAM>, grid, block, st, p, g, s0, s1, n, n4, a)); break;
    default: SD_CUDA(sdc_launch(sdc_update_kernel<SDC_ADAMW>, grid, block, st, p, g, s0, s1, n, n4, a)); break;
    }
    return SD_OK;
}

extern "C" int sdc_reset_status(const sdc_ctx *c) {
    if (!c) return SD_FAIL(SD_ERR_ARG, "sdc_reset_status: no context");
    SD_TRY(sdc_use_device(c->device));
    SD_CUDA(cudaMemsetAsync((void *)(uintptr_t)c->status, 0, SDC_STATUS_WORDS * sizeof(float),
                            (cudaStream_t)(uintptr_t)c->stream));
    return SD_OK;
}

/* ---- bf16 ---- */

/*
 * sdc_adamw_bf16: AdamW over fp32 master weights with a bf16 copy of the
 * result, one launch per tensor or span (the bf16 step harness's update;
 * the engine's is sdc_update over the arena). The hyperparameters are read
 * from device memory by the kernel, so a captured launch replays with
 * whatever the host wrote there before the replay. Per element, in
 * PyTorch's order:
 *   g = grad * grad_scale
 *   p = p * (1 - lr * wd)                 (only where the chunk decays)
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   p = p - (lr / (1 - b1^step)) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)
 */

__global__ void sdc_adamw_bf16_kernel(float *__restrict__ p, bf16 *__restrict__ pb, const float *__restrict__ g,
                                 float *__restrict__ m, float *__restrict__ v, const uint8_t *__restrict__ decay,
                                 int64_t chunk, int64_t n, const sdc_adamw_hyper *__restrict__ hp) {
    const sdc_adamw_hyper h = *hp;
    const float b1 = h.beta1, b2 = h.beta2;
    const float bc1 = 1.f - powf(b1, (float)h.step);
    const float bc2 = 1.f - powf(b2, (float)h.step);
    const float step_size = h.lr / bc1;
    const float bc2_sqrt = sqrtf(bc2);
    const float shrink = 1.f - h.lr * h.weight_decay;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float gi = g[i] * h.grad_scale;
        float pi = p[i];
        if (!decay || decay[i / chunk]) pi *= shrink;
        const float mi = b1 * m[i] + (1.f - b1) * gi;
        const float vi = b2 * v[i] + (1.f - b2) * gi * gi;
        pi -= step_size * mi / (sqrtf(vi) / bc2_sqrt + h.eps);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
        if (pb) pb[i] = __float2bfloat16(pi);
    }
}

extern "C" int sdc_adamw_bf16(const sdc_ctx *c, uint64_t params, uint64_t params_bf16, uint64_t grads, uint64_t m,
                              uint64_t v, uint64_t decay, int64_t chunk, int64_t n, uint64_t hyper) {
    if (!c || n < 0 || !params || !grads || !m || !v || !hyper || (decay && chunk <= 0))
        return SD_FAIL(SD_ERR_ARG, "sdc_adamw_bf16: n=%lld chunk=%lld, or a NULL pointer", (long long)n,
                       (long long)chunk);
    if (n == 0) return SD_OK;
    SD_TRY(sdc_use_device(c->device));
    int64_t blocks = (n + 255) / 256;
    if (blocks > 132 * 16) blocks = 132 * 16; /* grid-stride beyond that: the grid depends on n only */
    sdc_adamw_bf16_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)(uintptr_t)c->stream>>>(
        (float *)(uintptr_t)params, (bf16 *)(uintptr_t)params_bf16, (const float *)(uintptr_t)grads,
        (float *)(uintptr_t)m, (float *)(uintptr_t)v, (const uint8_t *)(uintptr_t)decay, chunk, n,
        (const sdc_adamw_hyper *)(uintptr_t)hyper);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
