/*
 * sd_collectives.cu: allreduce, reduce, broadcast, reduce-scatter and
 * all-gather kernels over nvshmem_ptr peer pointers, synchronised by flags in
 * symmetric memory.
 *
 * Protocol
 * --------
 * Every PE's symmetric sync area holds flag slots uint64 [3 phases][SD_MAX_BLOCKS][npes].
 * Slot [p][b][j] on PE i is the last epoch that block b of PE j announced to
 * PE i at phase p. Each PE keeps a local epoch per block index (epochs[b]).
 * A collective kernel runs G blocks; all PEs run the same collectives in the
 * same order with the same G (G depends only on the sizes and on max_blocks,
 * agreed at init), so block b of every PE gives the collective the same epoch
 * epochs[b] + 1.
 *
 * A barrier of block b at phase p (sd_block_barrier in sd_flags.cuh): after
 * __syncthreads, fence (system scope) and release-store the epoch into slot
 * [p][b][me] of every PE; then spin with acquire loads until every slot
 * [p][b][j] of this PE holds at least the epoch. Slots only grow, and a PE
 * can be at most one phase ahead of a peer, so ">=" is exact. Spins are
 * bounded by the GPU's nanosecond timer: on the deadline the block records
 * (phase, block, peer, epoch) in device memory, sets a mapped host word, and
 * stops; every other spinning block sees the failure and stops too; the host
 * reports the PEs whose slot is behind (sd_timeout_info). Blocks depend only on
 * the blocks of the same index on other PEs, never on other blocks of their
 * own grid, so no grid-wide synchronisation (or co-residency) is needed.
 *
 * Desync: with the check on (sd_set_call), every kernel carries the
 * fingerprint of its collective in its arguments, and at phase 0 each block
 * stores it into call slot [epoch % 2][b][me] of every PE before the flag,
 * and compares every peer's after the flag (sd_block_barrier). PEs in
 * different collectives meet at phase 0 anyway: every kernel starts with
 * that barrier and has a block 0, so block 0 of any two kernels at the same
 * position in their PEs' sequences meet with the same epoch. The block that
 * finds another call records it like a timeout (status->desync) once every
 * peer's call of its row has arrived, and stops before moving data; the
 * other blocks see the failure and stop, and so does every kernel queued
 * after them (sd_block_epoch). The host decodes the row (sd_wait.cu). A slot
 * is rewritten two epochs of its block later, which no peer reaches before
 * this PE has passed phase 0 of the epoch between, so the row a block reads
 * is its epoch's.
 *
 * One-shot allreduce (small buffers): block b owns vectors
 * [b*T*K, (b+1)*T*K) of the range (T threads, K vectors per thread).
 *   phase 0 barrier: every PE's data is ready (its earlier stream work is done);
 *   read the block's vectors from PE 0, 1, ..., N-1 in that order into
 *   registers and combine in that order;
 *   phase 1 barrier: every peer has finished reading this PE's vectors;
 *   write the result into the own buffer.
 * Two-shot allreduce (large buffers): the vectors are cut into N owner slices
 * of ceil(nvec/N); block b of PE q handles the grid-stride subset
 * {lo + b*T + t + k*G*T} of slice q.
 *   phase 0 barrier;
 *   reduce own slice from PE 0..N-1 in order and push the result into slice q
 *   of every PE's buffer at once (reduce-scatter and all-gather in one pass:
 *   only the owner of a slice reads or writes it in any buffer, so nothing
 *   races, and every PE moves S bytes in and S out, the least possible);
 *   phase 2 barrier: every slice of every buffer is final.
 * The up to 2*(16/size-1) elements before the first 16-byte boundary and after
 * the last belong to PE 0: its block 0 reduces them and pushes them likewise.
 * (The one-shot kernel reduces them in every PE, reading before phase 1 and
 * writing after it.) Every element is the left fold over PE 0..N-1 in float32
 * (((x0 + x1) + x2) + ...: bf16 is widened, folded in fp32 and rounded once at
 * the end), so every PE gets the same bits, the bits of the shm backend.
 * Mean divides the fold by float(N) (one correctly rounded division); Max
 * and Min follow Go's max and min (NaN wins, -0 < +0).
 * Reduce: phase 0, the root reduces in place from all PEs, phase 2.
 * Broadcast: phase 0, every non-root copies from the root, phase 2.
 * Reduce-scatter: the reduce kernel with every PE its own root, over its own
 * shard: phase 0, each PE reduces its shard from all PEs into its own copy
 * (the fold above, so the bits of an allreduce), phase 2 (no PE writes into
 * its buffer again while a peer still reads it). The shards are disjoint and
 * each PE writes only its own, so no phase 1 is needed.
 * All-gather: phase 0 (every shard is final), each PE pushes its shard into
 * every peer's copy, phase 2 (every push has landed).
 * The grid of both is sized by the largest shard, which every PE passes, not
 * by the PE's own: the barriers need the same G on every PE.
 *
 * Every kernel goes on sd_coll_stream(): the main stream, or between
 * sd_comm_fork and sd_comm_join the collectives stream, behind the one-block
 * arrival barrier that sd_coll_arrival enqueues (sd_overlap.cu says why).
 *
 * When some PE cannot reach a peer by pointer (another node), all PEs use
 * NVSHMEM's on-stream team collectives instead (sd_fallback_*), staged through
 * the symmetric staging buffer. In NVSHMEM's "limited MPG" mode (several PEs
 * on one GPU without MPS) those abort the process: they are used only when a
 * peer is really unreachable, or when asked for (SD_ALGO_NVSHMEM).
 */
#include <cuda_bf16.h>

#include "sd_flags.cuh"

/* Vectors per thread of the one-shot kernel (registers hold them between phases). */
#define SD_ONE_SHOT_K 2
/* Vectors in flight per thread in the grid-stride copy loops. */
#define SD_UNROLL 4

/* ---- element types ---- */

template <typename T> struct sd_elem;

template <> struct sd_elem<float> {
    static const int V = 4; /* elements per 16-byte vector */
    static const int U = 4; /* vectors in flight per thread when reducing */
    __device__ static float load(const char *p) {
        return __uint_as_float(__ldcg((const unsigned int *)p));
    }
    __device__ static void store(char *p, float x) { *(float *)p = x; }
    __device__ static void unpack(const uint4 &u, float (&f)[4]) {
        f[0] = __uint_as_float(u.x);
        f[1] = __uint_as_float(u.y);
        f[2] = __uint_as_float(u.z);
        f[3] = __uint_as_float(u.w);
    }
    __device__ static uint4 pack(const float (&f)[4]) {
        return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                          __float_as_uint(f[3]));
    }
};

/* bf16 <-> fp32: widening is exact; narrowing rounds to nearest even. */
static __device__ __forceinline__ unsigned int sd_bf16_bits(float x) {
    return (unsigned int)__bfloat16_as_ushort(__float2bfloat16_rn(x));
}

template <> struct sd_elem<__nv_bfloat16> {
    static const int V = 8;
    static const int U = 2; /* 8 fp32 accumulators per vector: fewer in flight, no spills */
    __device__ static float load(const char *p) {
        return __uint_as_float((unsigned int)__ldcg((const unsigned short *)p) << 16);
    }
    __device__ static void store(char *p, float x) {
        *(unsigned short *)p = (unsigned short)sd_bf16_bits(x);
    }
    __device__ static void unpack_word(unsigned int w, float &lo, float &hi) {
        lo = __uint_as_float(w << 16);
        hi = __uint_as_float(w & 0xffff0000u);
    }
    __device__ static void unpack(const uint4 &u, float (&f)[8]) {
        unpack_word(u.x, f[0], f[1]);
        unpack_word(u.y, f[2], f[3]);
        unpack_word(u.z, f[4], f[5]);
        unpack_word(u.w, f[6], f[7]);
    }
    __device__ static unsigned int pack_word(float lo, float hi) {
        return sd_bf16_bits(lo) | (sd_bf16_bits(hi) << 16);
    }
    __device__ static uint4 pack(const float (&f)[8]) {
        return make_uint4(pack_word(f[0], f[1]), pack_word(f[2], f[3]), pack_word(f[4], f[5]),
                          pack_word(f[6], f[7]));
    }
};

/* ---- operators: combine in PE order, then finish once ---- */

/*
 * Max and Min as Go's built-in max and min (comm.Op's definition): a NaN
 * argument wins (the later one when both are), and -0 < +0. Sum adds in
 * round-to-nearest without FMA contraction; Mean divides the sum by the
 * number of PEs, one correctly rounded division.
 */
template <int OP> struct sd_op {
    __device__ static float combine(float acc, float x) {
        if (OP == SD_MAX) {
            if (x != x || x > acc) return x;
            if (acc != acc || acc > x || acc != 0.0f) return acc;
            return __uint_as_float(__float_as_uint(acc) & __float_as_uint(x));
        }
        if (OP == SD_MIN) {
            if (x != x || x < acc) return x;
            if (acc != acc || acc < x || acc != 0.0f) return acc;
            return __uint_as_float(__float_as_uint(acc) | __float_as_uint(x));
        }
        return __fadd_rn(acc, x);
    }
    __device__ static float finish(float acc, float npes) {
        return OP == SD_MEAN ? __fdiv_rn(acc, npes) : acc;
    }
};

/* The part of a buffer a collective works on, cut at 16-byte boundaries. */
struct sd_range {
    size_t off;  /* bytes from the buffer's base to the range's first element */
    size_t head; /* elements before the first 16-byte boundary */
    size_t nvec; /* 16-byte vectors */
    size_t tail; /* elements after the last vector */
};

/* Element index (from the range's start) of scalar t of block 0: head first, then tail. */
template <int V> __device__ __forceinline__ size_t sd_scalar_index(const sd_range &r, size_t t) {
    return t < r.head ? t : r.head + r.nvec * V + (t - r.head);
}

/* Reduces scalar element idx over all PEs in order (block 0's share of the range). */
template <typename T, int OP>
static __device__ __forceinline__ float sd_reduce_scalar(void *const *peers, int npes, size_t byte) {
    typedef sd_elem<T> E;
    float acc = E::load((const char *)peers[0] + byte);
    for (int p = 1; p < npes; p++) acc = sd_op<OP>::combine(acc, E::load((const char *)peers[p] + byte));
    return acc;
}

/* ---- one-shot allreduce ---- */

template <typename T, int OP>
__global__ void __launch_bounds__(SD_THREADS, 2)
    sd_allreduce_one_shot(sd_sync s, void *const *peers, char *mine, sd_range r, float npes_f) {
    typedef sd_elem<T> E;
    const int V = E::V;
    const uint64_t epoch = sd_block_epoch(s);
    if (!sd_block_barrier(s, 0, epoch)) return;

    const size_t body = r.off + r.head * sizeof(T);
    const size_t v0 = (size_t)blockIdx.x * blockDim.x * SD_ONE_SHOT_K + threadIdx.x;
    float acc[SD_ONE_SHOT_K][V];
    {
        const char *src = (const char *)peers[0] + body;
#pragma unroll
        for (int k = 0; k < SD_ONE_SHOT_K; k++) {
            const size_t v = v0 + (size_t)k * blockDim.x;
            if (v < r.nvec) E::unpack(__ldcg((const uint4 *)(src + v * 16)), acc[k]);
        }
    }
    for (int p = 1; p < s.npes; p++) {
        const char *src = (const char *)peers[p] + body;
        uint4 x[SD_ONE_SHOT_K];
#pragma unroll
        for (int k = 0; k < SD_ONE_SHOT_K; k++) {
            const size_t v = v0 + (size_t)k * blockDim.x;
            if (v < r.nvec) x[k] = __ldcg((const uint4 *)(src + v * 16));
        }
#pragma unroll
        for (int k = 0; k < SD_ONE_SHOT_K; k++) {
            const size_t v = v0 + (size_t)k * blockDim.x;
            if (v < r.nvec) {
                float f[V];
                E::unpack(x[k], f);
#pragma unroll
                for (int i = 0; i < V; i++) acc[k][i] = sd_op<OP>::combine(acc[k][i], f[i]);
            }
        }
    }
    const bool scalar = blockIdx.x == 0 && threadIdx.x < r.head + r.tail;
    size_t sbyte = 0;
    float sacc = 0.0f;
    if (scalar) {
        sbyte = r.off + sd_scalar_index<V>(r, threadIdx.x) * sizeof(T);
        sacc = sd_reduce_scalar<T, OP>(peers, s.npes, sbyte);
    }

    if (!sd_block_barrier(s, 1, epoch)) return;

#pragma unroll
    for (int k = 0; k < SD_ONE_SHOT_K; k++) {
        const size_t v = v0 + (size_t)k * blockDim.x;
        if (v < r.nvec) {
#pragma unroll
            for (int i = 0; i < V; i++) acc[k][i] = sd_op<OP>::finish(acc[k][i], npes_f);
            *(uint4 *)(mine + body + v * 16) = E::pack(acc[k]);
        }
    }
    if (scalar) E::store(mine + sbyte, sd_op<OP>::finish(sacc, npes_f));
}

/* ---- grid-stride pieces shared by two-shot, reduce, broadcast, all-gather ---- */

/*
 * Stores x at byte at of the copies of the count PEs after me (me+1, me+2,
 * ..., mod npes; count = npes ends with the own copy): every PE starts with
 * another peer, which spreads the writes over the links.
 */
template <typename X>
static __device__ __forceinline__ void sd_push(void *const *peers, int npes, int me, int count,
                                               size_t at, const X &x) {
    for (int i = 1; i <= count; i++) *(X *)((char *)peers[(me + i) % npes] + at) = x;
}

/*
 * Reduces the vectors {v0 + m*stride : m >= 0} below hi of the range at body
 * over all PEs in order and writes them (finished) to dst + body.
 */
template <typename T, int OP, bool PUSH = false>
static __device__ __forceinline__ void sd_reduce_vectors(void *const *peers, int npes, char *dst,
                                                  size_t body, size_t v0, size_t hi,
                                                  size_t stride, float npes_f, int me = 0) {
    typedef sd_elem<T> E;
    const int V = E::V;
    const int U = E::U;
    for (size_t v = v0; v < hi; v += stride * U) {
        float acc[U][V];
        uint4 x[U];
        {
            const char *src = (const char *)peers[0] + body;
#pragma unroll
            for (int u = 0; u < U; u++) {
                const size_t vu = v + (size_t)u * stride;
                if (vu < hi) x[u] = __ldcg((const uint4 *)(src + vu * 16));
            }
#pragma unroll
            for (int u = 0; u < U; u++)
                if (v + (size_t)u * stride < hi) E::unpack(x[u], acc[u]);
        }
        for (int p = 1; p < npes; p++) {
            const char *src = (const char *)peers[p] + body;
#pragma unroll
            for (int u = 0; u < U; u++) {
                const size_t vu = v + (size_t)u * stride;
                if (vu < hi) x[u] = __ldcg((const uint4 *)(src + vu * 16));
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (v + (size_t)u * stride < hi) {
                    float f[V];
                    E::unpack(x[u], f);
#pragma unroll
                    for (int i = 0; i < V; i++) acc[u][i] = sd_op<OP>::combine(acc[u][i], f[i]);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t vu = v + (size_t)u * stride;
            if (vu < hi) {
#pragma unroll
                for (int i = 0; i < V; i++) acc[u][i] = sd_op<OP>::finish(acc[u][i], npes_f);
                const uint4 out = E::pack(acc[u]);
                if (PUSH) {
                    sd_push(peers, npes, me, npes, body + vu * 16, out); /* into every PE's copy */
                } else {
                    *(uint4 *)(dst + body + vu * 16) = out;
                }
            }
        }
    }
}

/*
 * Loads the vectors {v0 + m*stride} below hi at byte body of src and hands
 * each to store(byte offset, vector), which writes it wherever it goes.
 */
template <typename Store>
static __device__ __forceinline__ void sd_copy_vectors(const char *src, size_t body, size_t v0,
                                                       size_t hi, size_t stride, Store store) {
    for (size_t v = v0; v < hi; v += stride * SD_UNROLL) {
        uint4 x[SD_UNROLL];
#pragma unroll
        for (int u = 0; u < SD_UNROLL; u++) {
            const size_t vu = v + (size_t)u * stride;
            if (vu < hi) x[u] = __ldcg((const uint4 *)(src + body + vu * 16));
        }
#pragma unroll
        for (int u = 0; u < SD_UNROLL; u++) {
            const size_t vu = v + (size_t)u * stride;
            if (vu < hi) store(body + vu * 16, x[u]);
        }
    }
}

/* ---- two-shot allreduce ---- */

template <typename T, int OP>
__global__ void __launch_bounds__(SD_THREADS, 2)
    sd_allreduce_two_shot(sd_sync s, void *const *peers, char *mine, sd_range r, size_t per,
                          float npes_f) {
    typedef sd_elem<T> E;
    const int V = E::V;
    const uint64_t epoch = sd_block_epoch(s);
    if (!sd_block_barrier(s, 0, epoch)) return;

    const size_t body = r.off + r.head * sizeof(T);
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    {
        /* reduce the own slice and push the result into every PE's copy */
        const size_t lo = min((size_t)s.me * per, r.nvec), hi = min(lo + per, r.nvec);
        sd_reduce_vectors<T, OP, true>(peers, s.npes, mine, body, lo + first, hi, stride, npes_f, s.me);
    }
    /* PE 0 owns the unaligned head and tail elements */
    if (s.me == 0 && blockIdx.x == 0 && threadIdx.x < r.head + r.tail) {
        const size_t sbyte = r.off + sd_scalar_index<V>(r, threadIdx.x) * sizeof(T);
        const float out = sd_op<OP>::finish(sd_reduce_scalar<T, OP>(peers, s.npes, sbyte), npes_f);
        for (int q = 0; q < s.npes; q++) E::store((char *)peers[q] + sbyte, out);
    }

    (void)sd_block_barrier(s, 2, epoch);
}

/* ---- reduce to a root (and reduce-scatter: every PE its own root) ---- */

template <typename T, int OP>
__global__ void __launch_bounds__(SD_THREADS, 2)
    sd_reduce_kernel(sd_sync s, void *const *peers, char *mine, sd_range r, int root,
                     float npes_f) {
    typedef sd_elem<T> E;
    const int V = E::V;
    const uint64_t epoch = sd_block_epoch(s);
    if (!sd_block_barrier(s, 0, epoch)) return;
    if (s.me == root) {
        const size_t body = r.off + r.head * sizeof(T);
        const size_t stride = (size_t)gridDim.x * blockDim.x;
        const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
        sd_reduce_vectors<T, OP>(peers, s.npes, mine, body, first, r.nvec, stride, npes_f);
        if (blockIdx.x == 0 && threadIdx.x < r.head + r.tail) {
            const size_t sbyte = r.off + sd_scalar_index<V>(r, threadIdx.x) * sizeof(T);
            E::store(mine + sbyte,
                     sd_op<OP>::finish(sd_reduce_scalar<T, OP>(peers, s.npes, sbyte), npes_f));
        }
    }
    (void)sd_block_barrier(s, 2, epoch);
}

/* ---- broadcast (bytes) ---- */

__global__ void __launch_bounds__(SD_THREADS, 2)
    sd_broadcast_kernel(sd_sync s, void *const *peers, char *mine, sd_range r, int root) {
    const uint64_t epoch = sd_block_epoch(s);
    if (!sd_block_barrier(s, 0, epoch)) return;
    if (s.me != root) {
        const char *src = (const char *)peers[root];
        const size_t body = r.off + r.head;
        const size_t stride = (size_t)gridDim.x * blockDim.x;
        const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
        sd_copy_vectors(src, body, first, r.nvec, stride,
                        [=](size_t at, const uint4 &x) { *(uint4 *)(mine + at) = x; });
        if (blockIdx.x == 0 && threadIdx.x < r.head + r.tail) {
            const size_t byte = r.off + sd_scalar_index<16>(r, threadIdx.x);
            mine[byte] = (char)__ldcg((const unsigned char *)(src + byte));
        }
    }
    (void)sd_block_barrier(s, 2, epoch);
}

/* ---- all-gather (bytes): every PE pushes its shard r into every peer's copy ---- */

__global__ void __launch_bounds__(SD_THREADS, 2)
    sd_allgather_kernel(sd_sync s, void *const *peers, const char *mine, sd_range r) {
    const uint64_t epoch = sd_block_epoch(s);
    if (!sd_block_barrier(s, 0, epoch)) return;
    const int npes = s.npes, me = s.me;
    const size_t body = r.off + r.head;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    sd_copy_vectors(mine, body, first, r.nvec, stride, [=](size_t at, const uint4 &x) {
        sd_push(peers, npes, me, npes - 1, at, x);
    });
    if (blockIdx.x == 0 && threadIdx.x < r.head + r.tail) {
        const size_t byte = r.off + sd_scalar_index<16>(r, threadIdx.x);
        sd_push(peers, npes, me, npes - 1, byte, (char)__ldcg((const unsigned char *)(mine + byte)));
    }
    (void)sd_block_barrier(s, 2, epoch);
}

/* ---- NVSHMEM fallback helpers ---- */

template <typename T>
__global__ void sd_to_f32_kernel(float *dst, const char *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = sd_elem<T>::load(src + i * sizeof(T));
}

template <typename T>
__global__ void sd_from_f32_kernel(char *dst, const float *src, size_t n, int mean, float npes) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float x = mean ? __fdiv_rn(src[i], npes) : src[i];
        sd_elem<T>::store(dst + i * sizeof(T), x);
    }
}

/* ---- host side ---- */

static size_t sd_elem_size(int dtype) {
    return dtype == SD_F32 ? 4 : dtype == SD_BF16 ? 2 : 0;
}

/* Checks n elements of size esize at element off of b. */
static int sd_check_elems(const char *what, const sd_buf *b, size_t off, size_t n, size_t esize) {
    if (!b) return SD_FAIL(SD_ERR_ARG, "%s: NULL buffer", what);
    if (!esize) return SD_FAIL(SD_ERR_ARG, "%s: unknown element type", what);
    const size_t cap = b->bytes / esize;
    if (off > cap || n > cap - off)
        return SD_FAIL(SD_ERR_ARG, "%s: elements [%zu, %zu) of a %zu-element buffer", what, off,
                       off + n, cap);
    return SD_OK;
}

/* Cuts n elements of size esize at element off of b at 16-byte boundaries. */
static sd_range sd_make_range(const sd_buf *b, size_t off, size_t n, size_t esize) {
    sd_range r;
    r.off = off * esize;
    const size_t mis = (size_t)(((uintptr_t)b->base + r.off) % 16);
    r.head = mis ? (16 - mis) / esize : 0;
    if (r.head > n) r.head = n;
    const size_t per_vec = 16 / esize;
    r.nvec = (n - r.head) / per_vec;
    r.tail = n - r.head - r.nvec * per_vec;
    return r;
}

/* Blocks for work items of per_block each, between 1 and the agreed maximum. */
static unsigned sd_grid(size_t items, size_t per_block) {
    size_t g = (items + per_block - 1) / per_block;
    if (g < 1) g = 1;
    if (g > (size_t)g_sd.max_blocks) g = (size_t)g_sd.max_blocks;
    return (unsigned)g;
}

/* The divisor of Mean. */
static float sd_npes_f(void) { return (float)g_sd.npes; }

static int sd_nvshmem_reduce(int op, float *dst, const float *src, size_t n) {
    int rc;
    switch (op) {
    case SD_MAX: rc = nvshmemx_float_max_reduce_on_stream(NVSHMEM_TEAM_WORLD, dst, src, n, sd_coll_stream()); break;
    case SD_MIN: rc = nvshmemx_float_min_reduce_on_stream(NVSHMEM_TEAM_WORLD, dst, src, n, sd_coll_stream()); break;
    default: rc = nvshmemx_float_sum_reduce_on_stream(NVSHMEM_TEAM_WORLD, dst, src, n, sd_coll_stream()); break;
    }
    if (rc != 0) return SD_FAIL(SD_ERR, "nvshmemx_float_%s_reduce_on_stream(%zu) failed with status %d",
                                op == SD_MAX ? "max" : op == SD_MIN ? "min" : "sum", n, rc);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/*
 * Allreduce (root < 0) or reduce to root through NVSHMEM's team reduction,
 * chunk by chunk: the staging buffer's first half receives the fp32 result;
 * bf16 input is widened into its second half first. Every PE (or the root)
 * then writes the chunk back, finished.
 */
template <typename T>
static int sd_fallback_reduce(sd_buf *b, size_t off, size_t n, int op, int root) {
    const size_t half = SD_STAGING_BYTES / 2;
    const size_t chunk = half / sizeof(float);
    float *out = (float *)g_sd.staging;
    float *wide = (float *)((char *)g_sd.staging + half);
    for (size_t k = 0; k < n; k += chunk) {
        const size_t m = n - k < chunk ? n - k : chunk;
        char *src = (char *)b->base + (off + k) * sizeof(T);
        const unsigned g = sd_grid(m, SD_THREADS * 4);
        const float *in = (const float *)src;
        if (sizeof(T) != sizeof(float)) {
            sd_to_f32_kernel<T><<<g, SD_THREADS, 0, sd_coll_stream()>>>(wide, src, m);
            SD_CUDA(cudaGetLastError());
            in = wide;
        }
        SD_TRY(sd_nvshmem_reduce(op, out, in, m));
        const float *result = out;
        if (root < 0 && g_sd.npes > 1) {
            /* NVSHMEM's reduction may add in a different order on each PE (seen
             * at 4 PEs): every PE takes PE 0's bits, so replicas stay identical.
             * The barriers keep the broadcast off buffers a peer still reads. */
            SD_TRY(sd_nvshmem_barrier(sd_coll_stream()));
            const int rc = nvshmemx_broadcastmem_on_stream(NVSHMEM_TEAM_WORLD, wide, out,
                                                           m * sizeof(float), 0, sd_coll_stream());
            if (rc != 0)
                return SD_FAIL(SD_ERR, "nvshmemx_broadcastmem_on_stream(%zu) failed with status %d",
                               m * sizeof(float), rc);
            if (g_sd.pe != 0) result = wide;
        }
        if (root < 0 || root == g_sd.pe) {
            sd_from_f32_kernel<T><<<g, SD_THREADS, 0, sd_coll_stream()>>>(src, result, m, op == SD_MEAN,
                                                                     sd_npes_f());
            SD_CUDA(cudaGetLastError());
        }
        if (root < 0 && g_sd.npes > 1) SD_TRY(sd_nvshmem_barrier(sd_coll_stream()));
    }
    return SD_OK;
}

/*
 * Broadcast through the staging buffer, chunk by chunk, between barriers: the
 * first keeps the root's puts off a staging buffer that a peer still copies
 * out of (the previous chunk, or the previous PE's broadcast of an
 * all-gather), the second has every chunk arrived before it is copied out.
 * Without them an all-gather of one broadcast per PE (2 PEs under MPS,
 * SYMDDP_FORCE_NVSHMEM) left part of a shard with the staging buffer's old
 * bytes (H200, 2026-12-02).
 */
static int sd_fallback_broadcast(sd_buf *b, size_t off, size_t bytes, int root) {
    const bool many = g_sd.npes > 1;
    for (size_t k = 0; k < bytes; k += SD_STAGING_BYTES) {
        const size_t m = bytes - k < SD_STAGING_BYTES ? bytes - k : SD_STAGING_BYTES;
        char *p = (char *)b->base + off + k;
        if (many) SD_TRY(sd_nvshmem_barrier(sd_coll_stream()));
        int rc = nvshmemx_broadcastmem_on_stream(NVSHMEM_TEAM_WORLD, g_sd.staging, p, m, root,
                                                 sd_coll_stream());
        if (rc != 0)
            return SD_FAIL(SD_ERR, "nvshmemx_broadcastmem_on_stream(%zu) failed with status %d", m, rc);
        if (many) SD_TRY(sd_nvshmem_barrier(sd_coll_stream()));
        if (g_sd.pe != root)
            SD_CUDA(cudaMemcpyAsync(p, g_sd.staging, m, cudaMemcpyDeviceToDevice, sd_coll_stream()));
    }
    return SD_OK;
}

template <typename T, int OP>
static int sd_allreduce_launch(sd_buf *b, size_t off, size_t n, int algo) {
    const sd_range r = sd_make_range(b, off, n, sizeof(T));
    const sd_sync s = sd_sync_args(SD_OP_ALLREDUCE);
    const size_t one_shot_per_block = (size_t)SD_THREADS * SD_ONE_SHOT_K;
    const size_t one_shot_blocks = (r.nvec + one_shot_per_block - 1) / one_shot_per_block;
    const bool fits = one_shot_blocks <= (size_t)g_sd.max_blocks;
    if (algo == SD_ALGO_ONE_SHOT && !fits)
        return SD_FAIL(SD_ERR_ARG, "one-shot allreduce of %zu elements needs %zu blocks, %d allowed",
                       n, one_shot_blocks, g_sd.max_blocks);
    const bool one = algo == SD_ALGO_ONE_SHOT ||
                     (algo == SD_ALGO_AUTO && fits && n * sizeof(T) <= g_sd.one_shot_max);
    if (one) {
        const unsigned g = one_shot_blocks ? (unsigned)one_shot_blocks : 1u;
        sd_allreduce_one_shot<T, OP><<<g, SD_THREADS, 0, sd_coll_stream()>>>(
            s, (void *const *)b->d_peers, (char *)b->base, r, sd_npes_f());
    } else {
        const size_t per = (r.nvec + (size_t)g_sd.npes - 1) / (size_t)g_sd.npes;
        const unsigned g = sd_grid(per, (size_t)SD_THREADS * sd_elem<T>::U);
        sd_allreduce_two_shot<T, OP><<<g, SD_THREADS, 0, sd_coll_stream()>>>(
            s, (void *const *)b->d_peers, (char *)b->base, r, per, sd_npes_f());
    }
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/*
 * The reduce kernel over elements [off, off+n) into root's copy, its grid
 * sized for span elements (n for a reduce; the largest shard for a
 * reduce-scatter, whose every PE is the root of its own shard); opid names
 * it in timeout reports.
 */
template <typename T, int OP>
static int sd_reduce_launch(sd_buf *b, size_t off, size_t n, int root, size_t span, int opid) {
    const sd_range r = sd_make_range(b, off, n, sizeof(T));
    const size_t vecs = (span + sd_elem<T>::V - 1) / sd_elem<T>::V;
    const unsigned g = sd_grid(vecs, (size_t)SD_THREADS * sd_elem<T>::U);
    sd_reduce_kernel<T, OP><<<g, SD_THREADS, 0, sd_coll_stream()>>>(
        sd_sync_args(opid), (void *const *)b->d_peers, (char *)b->base, r, root, sd_npes_f());
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/* sd_reduce_launch of type T for the operator op. */
template <typename T>
static int sd_rooted_reduce(sd_buf *b, size_t off, size_t n, int op, int root, size_t span,
                            int opid) {
    switch (op) {
    case SD_SUM: return sd_reduce_launch<T, SD_SUM>(b, off, n, root, span, opid);
    case SD_MEAN: return sd_reduce_launch<T, SD_MEAN>(b, off, n, root, span, opid);
    case SD_MAX: return sd_reduce_launch<T, SD_MAX>(b, off, n, root, span, opid);
    case SD_MIN: return sd_reduce_launch<T, SD_MIN>(b, off, n, root, span, opid);
    }
    return SD_FAIL(SD_ERR_ARG, "unknown reduction operator %d", op);
}

/* Instantiates the kernels of type T for the operator op. */
template <typename T>
static int sd_reduce_any(sd_buf *b, size_t off, size_t n, int op, int algo, int root) {
    if (root >= 0) return sd_rooted_reduce<T>(b, off, n, op, root, n, SD_OP_REDUCE);
    switch (op) {
    case SD_SUM: return sd_allreduce_launch<T, SD_SUM>(b, off, n, algo);
    case SD_MEAN: return sd_allreduce_launch<T, SD_MEAN>(b, off, n, algo);
    case SD_MAX: return sd_allreduce_launch<T, SD_MAX>(b, off, n, algo);
    case SD_MIN: return sd_allreduce_launch<T, SD_MIN>(b, off, n, algo);
    }
    return SD_FAIL(SD_ERR_ARG, "unknown reduction operator %d", op);
}

/* Allreduce (root < 0) or reduce to root: checks, then the kernel or the fallback. */
static int sd_reduction(const char *what, sd_buf *b, size_t off, size_t n, int dtype, int op,
                        int algo, int root) {
    SD_TRY(sd_require_init(what));
    SD_TRY(sd_check_elems(what, b, off, n, sd_elem_size(dtype)));
    if (op < SD_SUM || op > SD_MIN) return SD_FAIL(SD_ERR_ARG, "%s: unknown operator %d", what, op);
    if (algo < SD_ALGO_AUTO || algo > SD_ALGO_NVSHMEM)
        return SD_FAIL(SD_ERR_ARG, "%s: unknown algorithm %d", what, algo);
    if (root >= g_sd.npes) return SD_FAIL(SD_ERR_ARG, "%s: root PE %d of %d", what, root, g_sd.npes);
    if (n == 0) return SD_OK;
    SD_TRY(sd_coll_arrival());
    const bool fallback = algo == SD_ALGO_NVSHMEM || !g_sd.all_reachable;
    if (dtype == SD_F32)
        return fallback ? sd_fallback_reduce<float>(b, off, n, op, root)
                        : sd_reduce_any<float>(b, off, n, op, algo, root);
    return fallback ? sd_fallback_reduce<__nv_bfloat16>(b, off, n, op, root)
                    : sd_reduce_any<__nv_bfloat16>(b, off, n, op, algo, root);
}

extern "C" int sd_allreduce_enqueue(sd_buf *b, size_t off, size_t n, int32_t dtype, int32_t op,
                                    int32_t algo) {
    return sd_reduction("sd_allreduce_enqueue", b, off, n, dtype, op, algo, -1);
}

extern "C" int sd_reduce_enqueue(sd_buf *b, size_t off, size_t n, int32_t dtype, int32_t op,
                                 int32_t root) {
    if (root < 0) return SD_FAIL(SD_ERR_ARG, "sd_reduce_enqueue: root PE %d", root);
    return sd_reduction("sd_reduce_enqueue", b, off, n, dtype, op, SD_ALGO_AUTO, root);
}

extern "C" int sd_broadcast_enqueue(sd_buf *b, size_t off, size_t bytes, int32_t root) {
    SD_TRY(sd_require_init("sd_broadcast_enqueue"));
    SD_TRY(sd_check_elems("sd_broadcast_enqueue", b, off, bytes, 1));
    if (root < 0 || root >= g_sd.npes)
        return SD_FAIL(SD_ERR_ARG, "sd_broadcast_enqueue: root PE %d of %d", root, g_sd.npes);
    if (bytes == 0) return SD_OK;
    SD_TRY(sd_coll_arrival());
    if (!g_sd.all_reachable) return sd_fallback_broadcast(b, off, bytes, root);
    const sd_range r = sd_make_range(b, off, bytes, 1);
    const unsigned g = sd_grid(r.nvec, (size_t)SD_THREADS * SD_UNROLL);
    sd_broadcast_kernel<<<g, SD_THREADS, 0, sd_coll_stream()>>>(
        sd_sync_args(SD_OP_BROADCAST), (void *const *)b->d_peers, (char *)b->base, r, root);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}

/*
 * Checks the arguments of a sharded collective: this PE's shard [lo, hi) of
 * b in elements of esize, no longer than span, the largest shard; every peer
 * in pointer reach.
 */
static int sd_check_shard(const char *what, const sd_buf *b, size_t lo, size_t hi, size_t span,
                          size_t esize) {
    SD_TRY(sd_require_init(what));
    if (hi < lo) return SD_FAIL(SD_ERR_ARG, "%s: shard [%zu, %zu) ends before it starts", what, lo, hi);
    SD_TRY(sd_check_elems(what, b, lo, hi - lo, esize));
    if (hi - lo > span)
        return SD_FAIL(SD_ERR_ARG, "%s: shard [%zu, %zu) is longer than the largest shard (%zu)",
                       what, lo, hi, span);
    if (span > b->bytes / esize)
        return SD_FAIL(SD_ERR_ARG, "%s: a largest shard of %zu elements in a %zu-element buffer",
                       what, span, b->bytes / esize);
    if (!g_sd.all_reachable)
        return SD_FAIL(SD_ERR_ARG,
                       "%s: the sharded collectives need every peer reachable by pointer "
                       "(some peer is on another node, or SYMDDP_FORCE_NVSHMEM is set)",
                       what);
    return SD_OK;
}

extern "C" int sd_reduce_scatter_enqueue(sd_buf *b, size_t lo, size_t hi, size_t span,
                                         int32_t dtype, int32_t op) {
    static const char what[] = "sd_reduce_scatter_enqueue";
    SD_TRY(sd_check_shard(what, b, lo, hi, span, sd_elem_size(dtype)));
    if (op < SD_SUM || op > SD_MIN) return SD_FAIL(SD_ERR_ARG, "%s: unknown operator %d", what, op);
    if (span == 0) return SD_OK; /* every shard is empty: no PE launches */
    SD_TRY(sd_coll_arrival());
    if (dtype == SD_F32)
        return sd_rooted_reduce<float>(b, lo, hi - lo, op, g_sd.pe, span, SD_OP_REDUCE_SCATTER);
    return sd_rooted_reduce<__nv_bfloat16>(b, lo, hi - lo, op, g_sd.pe, span, SD_OP_REDUCE_SCATTER);
}

extern "C" int sd_allgather_enqueue(sd_buf *b, size_t lo, size_t hi, size_t span) {
    static const char what[] = "sd_allgather_enqueue";
    SD_TRY(sd_check_shard(what, b, lo, hi, span, 1));
    if (span == 0) return SD_OK;
    SD_TRY(sd_coll_arrival());
    const sd_range r = sd_make_range(b, lo, hi - lo, 1);
    const unsigned g = sd_grid((span + 15) / 16, (size_t)SD_THREADS * SD_UNROLL);
    sd_allgather_kernel<<<g, SD_THREADS, 0, sd_coll_stream()>>>(
        sd_sync_args(SD_OP_ALLGATHER), (void *const *)b->d_peers, (const char *)b->base, r);
    SD_CUDA(cudaGetLastError());
    return SD_OK;
}
