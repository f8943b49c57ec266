/*
 * sd_bf16.cuh: what the bf16 kernels of every operation share: 16-byte
 * vectors of 8 bf16 and deterministic warp sums. Plain CUDA, independent of
 * NVSHMEM.
 */
#ifndef SD_BF16_CUH
#define SD_BF16_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

/* 8 bf16 packed in a 16-byte vector as floats. */
static __device__ __forceinline__ void sdb_unpack8(const uint4 u, float f[8]) {
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 t = __bfloat1622float2(h[i]);
        f[2 * i] = t.x;
        f[2 * i + 1] = t.y;
    }
}

/* 8 bf16 at p (16-byte aligned) as floats. */
static __device__ __forceinline__ void sdb_load8(const bf16 *p, float f[8]) {
    sdb_unpack8(*reinterpret_cast<const uint4 *>(p), f);
}

/* 8 floats rounded to bf16 at p (16-byte aligned). */
static __device__ __forceinline__ void sdb_store8(bf16 *p, const float f[8]) {
    uint4 u;
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    *reinterpret_cast<uint4 *>(p) = u;
}

/* Butterfly sum over the warp: every lane gets the same bits. */
static __device__ __forceinline__ float sdb_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float sdb_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#endif /* SD_BF16_CUH */
