/*
 * sd_compute.cuh: small helpers every part of the compute engine
 * (sd_compute_*.cu) shares.
 */
#pragma once

#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "sd_internal.h"

/* Makes device current on the calling thread (sd_use_device): every compute
 * entry point does this first. */
static inline int sdc_use_device(int device) { return sd_use_device(device); }

/*
 * exp32 of internal/hostloops: e^x within a few ulps, x clamped to
 * ±88: a Cody-Waite reduction by ln 2 and a degree-7 Taylor polynomial in
 * Estrin's order, with round-to-nearest intrinsics (no FMA), so that the
 * kernels that follow hostloops' loops (GELU, the causal softmax) give the
 * CPU engine's bits.
 */
static __device__ __forceinline__ float sdc_exp32(float x) {
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    if (x > 88.0f) x = 88.0f;
    if (x < -88.0f) x = -88.0f;
    const float t = __fadd_rn(__fmul_rn(x, (float)1.4426950408889634), magic);
    const float n = __fsub_rn(t, magic);
    float r = __fsub_rn(x, __fmul_rn(n, (float)0.693359375));
    r = __fsub_rn(r, __fmul_rn(n, (float)-2.12194440054690583e-4));
    /* Estrin's scheme in hostloops' order (lanes.go, lanes.h) */
    const float r2 = __fmul_rn(r, r);
    const float a0 = __fadd_rn(r, 1.0f);
    const float a1 = __fadd_rn(__fmul_rn(r, 1.0f / 6.0f), 0.5f);
    const float a2 = __fadd_rn(__fmul_rn(r, 1.0f / 120.0f), 1.0f / 24.0f);
    const float a3 = __fadd_rn(__fmul_rn(r, 1.0f / 5040.0f), 1.0f / 720.0f);
    const float b0 = __fadd_rn(__fmul_rn(r2, a1), a0);
    const float b1 = __fadd_rn(__fmul_rn(r2, a3), a2);
    const float r4 = __fmul_rn(r2, r2);
    const float p = __fadd_rn(__fmul_rn(r4, b1), b0);
    const int32_t ni = (int32_t)(__float_as_uint(t) - 0x4b400000u);
    return __fmul_rn(p, __uint_as_float((uint32_t)(ni + 127) << 23));
}

/*
 * Rows in hostloops' eight lanes. The row kernels (layer norm, the causal
 * softmax) give a row to eight consecutive lanes of a warp, four rows a
 * warp: lane a of the eight (threadIdx.x % 8) takes the elements a, a+8,
 * a+16, ... of the row, as lane a of hostloops' sum8 does. Every lane of the
 * warp must call these (they shuffle within the eight), also the lanes of a
 * row past the end.
 *
 * sdc_lanes8 returns the eight lanes' values v[0..7] on every lane of the
 * eight; sdc_tree8 adds them as sum8 does, ((0+1)+(2+3))+((4+5)+(6+7)).
 */
static __device__ __forceinline__ void sdc_lanes8(float mine, float v[8]) {
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = __shfl_sync(0xffffffffu, mine, i, 8);
}

static __device__ __forceinline__ float sdc_tree8(const float v[8]) {
    return __fadd_rn(__fadd_rn(__fadd_rn(v[0], v[1]), __fadd_rn(v[2], v[3])),
                     __fadd_rn(__fadd_rn(v[4], v[5]), __fadd_rn(v[6], v[7])));
}

/* sum8 of the lane partials mine: sdc_tree8 of sdc_lanes8. */
static __device__ __forceinline__ float sdc_sum8(float mine) {
    float v[8];
    sdc_lanes8(mine, v);
    return sdc_tree8(v);
}

/*
 * Rows in L lanes, L a power of two up to 32 (the bf16 row kernels give a
 * row a whole warp): lane a of the L takes the elements a, a+L, ... of the
 * row's leading multiple of L. sdc_sum_lanes adds the lanes' partials
 * pairwise, neighbours first: ((0+1)+(2+3))+... (for L = 8 exactly
 * sdc_sum8's tree, so the same bits), every lane getting the sum; then the
 * row's tail (the ntail < L elements past the multiple, lane a holding tail
 * element a in tail) is added one by one in order. ntail must be the same
 * on all lanes of the warp, and every lane must call it.
 */
template <int L>
static __device__ __forceinline__ float sdc_sum_lanes(float mine, float tail, int ntail) {
    float s = mine;
#pragma unroll
    for (int off = 1; off < L; off <<= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, off, L));
    for (int i = 0; i < ntail; i++) s = __fadd_rn(s, __shfl_sync(0xffffffffu, tail, i, L));
    return s;
}

/*
 * The element types of the kernels that take an sdc_dtype: float, or bf16
 * held as its bits (sdc_bf16), read exactly (the bits in the high half of
 * a float) and stored rounded to nearest even on the bits, as
 * sdc_cast_bf16 rounds: add 0x7fff plus the lowest kept bit and keep the
 * high half (overflow goes to infinity); every NaN becomes 0x7fc0. The
 * emulated device (compute/cuda/cudatest) rounds the same way.
 */
typedef uint16_t sdc_bf16;

static __device__ __forceinline__ uint16_t sdc_bf16_rn(float v) {
    uint32_t u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static __device__ __forceinline__ float sdc_ld(const float *p) { return *p; }
static __device__ __forceinline__ float sdc_ld(const sdc_bf16 *p) { return __uint_as_float((uint32_t)*p << 16); }
static __device__ __forceinline__ void sdc_st(float *p, float v) { *p = v; }
static __device__ __forceinline__ void sdc_st(sdc_bf16 *p, float v) { *p = sdc_bf16_rn(v); }

/* 16 bytes of elements of T (4 floats or 8 bf16), for kernels that move
 * their elements in 16-byte loads and stores where every pointer is 16-byte
 * aligned (sdc_aligned16) and do on each element what their scalar loop
 * does: the same bits, fewer memory instructions. */
template <typename T>
union sdc_vec16 {
    uint4 u;
    T e[16 / sizeof(T)];
};

static inline bool sdc_aligned16(uint64_t p) { return p % 16 == 0; }

/* Whether v fits the int that cuBLAS takes for a size. */
static inline bool sdc_fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* Blocks for items work items at per_block items a block: at most per_sm
 * blocks per SM of a device with sm_count SMs, at least one. */
static inline int64_t sdc_grid(int64_t items, int64_t per_block, int sm_count, int per_sm) {
    int64_t g = (items + per_block - 1) / per_block;
    const int64_t cap = (int64_t)(sm_count > 0 ? sm_count : 1) * per_sm;
    if (g > cap) g = cap;
    return g < 1 ? 1 : g;
}

/*
 * Programmatic dependent launch (Hopper): the step's own kernels are
 * launched with cudaLaunchAttributeProgrammaticStreamSerialization, so the
 * GPU may start one while the kernel before it on the stream finishes
 * (its blocks are placed and its launch work done), and each such kernel
 * first waits in sdc_wait_prior_grid until every kernel before it has
 * completed and its writes are visible: the same order of effects, less
 * idle time between the short kernels of a small model's step (a kernel
 * boundary costs microseconds in a replayed graph). SYMDDP_CUDA_PDL=0
 * launches them plainly.
 */
static __device__ __forceinline__ void sdc_wait_prior_grid(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Whether the step's kernels use programmatic dependent launch (read once). */
static inline bool sdc_pdl(void) {
    static const bool on = [] {
        const char *v = getenv("SYMDDP_CUDA_PDL");
        return !(v && v[0] == '0');
    }();
    return on;
}

/* Launches kernel k on stream st, with programmatic dependent launch when
 * sdc_pdl() (see above); k must begin with sdc_wait_prior_grid. */
template <typename... Params, typename... Args>
static inline cudaError_t sdc_launch(void (*k)(Params...), dim3 grid, dim3 block, cudaStream_t st, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = 0;
    cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = sdc_pdl() ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, static_cast<Params>(args)...);
}

/* Asynchronous 16-byte copies from global into shared memory (cp.async,
 * sm_80 on), for kernels that fill their next tiles while they compute:
 * sdc_cp16 copies 16 bytes; sdc_cp16_zfill copies n of them (16, or 0:
 * zeros, g not read). sdc_cp_commit closes a thread's group of copies,
 * sdc_cp_wait<N> waits until at most its N newest groups are in flight; a
 * __syncthreads after that makes every thread's copies the block's. */
static __device__ __forceinline__ void sdc_cp16(void *s, const void *g) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(s)), "l"(g));
}
static __device__ __forceinline__ void sdc_cp16_zfill(void *s, const void *g, int n) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(s)),
                 "l"(g), "r"(n));
}
static __device__ __forceinline__ void sdc_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
static __device__ __forceinline__ void sdc_cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
