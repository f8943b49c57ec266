/*
 * sd_compute_loss.cu: softmax cross-entropy, forward and backward in one
 * kernel, with the loss and accuracy statistics reduced deterministically.
 *
 * logits (rows,classes), labels int32 (rows), dlogits (rows,classes), stats (3).
 *
 * One warp per row. Lane l scans classes l, l+32, ...; the warp finds the
 * row's maximum and its first arg-max (ties go to the smaller index), sums
 * exp(x - max) in double, and writes
 *   dlogits[j] = float32(float64(float32(p_j)) * scale / sum) - [j == label] * scale
 * with p_j = exp(x_j - max) in double, the same rounding steps as the CPU
 * engine. The row's loss is log(sum) - (x_label - max), in double. Rows
 * labelled -1 (padding), and rows whose label is out of range (the host
 * rejects those before they get here), get zero gradients and count for
 * nothing.
 *
 * Statistics without float atomics: block b owns rows [b*R, (b+1)*R); warp w
 * of it takes rows b*R+w, +8, ... and adds its rows' losses in row order; the
 * block adds its warps in warp order into partial b; the last block to finish
 * (an integer ticket) adds the partials in a fixed order with all its threads
 * (sd_reduce.cuh; one thread adding them one after another waited on a chain
 * of L2 loads, several microseconds) and adds the totals to stats as float32,
 * then resets the ticket.
 */
#include <math.h>
#include <string.h>

#include "sd_compute.cuh"
#include "sd_internal.h"
#include "sd_reduce.cuh"
#include "symddp_compute.h"
#include "sd_step_node.cuh"

#define SDC_XENT_WARPS 8
#define SDC_XENT_THREADS (SDC_XENT_WARPS * 32)
/* Counter 0 is this kernel's ticket. */
#define SDC_XENT_COUNTER 0

/* Per-block partial statistics in the scratch. */
struct sdc_xent_partial {
    double loss;
    int32_t correct;
    int32_t labelled;
};

/* Combines (value, index) pairs: the larger value, the smaller index on ties. */
static __device__ __forceinline__ void sdc_argmax_combine(float &v, int &j, float ov, int oj) {
    if (ov > v || (ov == v && oj < j)) {
        v = ov;
        j = oj;
    }
}

__global__ void __launch_bounds__(SDC_XENT_THREADS)
    sdc_xent_kernel(const float *__restrict__ logits, const int32_t *__restrict__ labels,
                    int64_t rows, int64_t classes, float *__restrict__ dlogits, float scale_arg,
                    const sdc_step *block, float *stats, sdc_xent_partial *partial,
                    uint32_t *ticket_word, int64_t rows_per_block) {
    sdc_wait_prior_grid();
    __shared__ double warp_loss[SDC_XENT_WARPS];
    __shared__ int32_t warp_correct[SDC_XENT_WARPS], warp_labelled[SDC_XENT_WARPS];
    __shared__ uint32_t ticket;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float scale = block ? block->loss_scale : scale_arg;
    const int64_t r0 = (int64_t)blockIdx.x * rows_per_block;
    const int64_t r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;

    double loss = 0.0;
    int32_t correct = 0, labelled = 0;
    for (int64_t r = r0 + warp; r < r1; r += SDC_XENT_WARPS) {
        const float *x = logits + r * classes;
        float *g = dlogits + r * classes;
        const int32_t y = labels[r];
        if (y < 0 || (int64_t)y >= classes) {
            for (int64_t j = lane; j < classes; j += 32) g[j] = 0.0f;
            continue;
        }
        /* Maximum and first arg-max. */
        float best = -INFINITY;
        int bj = 0x7fffffff;
        for (int64_t j = lane; j < classes; j += 32) {
            const float v = x[j];
            if (bj == 0x7fffffff || v > best) {
                best = v;
                bj = (int)j;
            }
        }
        for (int off = 16; off > 0; off >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, best, off);
            const int oj = __shfl_xor_sync(0xffffffffu, bj, off);
            sdc_argmax_combine(best, bj, ov, oj);
        }
        /* Lanes without a class carried index 0x7fffffff and lost every tie above. */
        const double m = (double)best;
        double sum = 0.0;
        for (int64_t j = lane; j < classes; j += 32) sum += exp((double)x[j] - m);
        for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        const double inv = (double)scale / sum;
        for (int64_t j = lane; j < classes; j += 32) {
            const float p = (float)exp((double)x[j] - m);
            float gj = (float)((double)p * inv);
            if (j == y) gj = __fsub_rn(gj, scale);
            g[j] = gj;
        }
        if (lane == 0) {
            loss += log(sum) - ((double)x[y] - m);
            correct += bj == y;
            labelled++;
        }
    }
    if (lane == 0) {
        warp_loss[warp] = loss;
        warp_correct[warp] = correct;
        warp_labelled[warp] = labelled;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        sdc_xent_partial p;
        p.loss = warp_loss[0];
        p.correct = warp_correct[0];
        p.labelled = warp_labelled[0];
        for (int w = 1; w < SDC_XENT_WARPS; w++) {
            p.loss += warp_loss[w];
            p.correct += warp_correct[w];
            p.labelled += warp_labelled[w];
        }
        partial[blockIdx.x] = p;
        __threadfence();
        ticket = atomicAdd(ticket_word, 1u);
    }
    __syncthreads();
    if (ticket != gridDim.x - 1) return; /* the same for the whole block */
    __threadfence();
    /* The last block adds the partials: thread t takes partials t, t+T, ...
     * in order, then the block sums (sd_reduce.cuh) in a fixed order. The
     * counts are integers below 2^53: exact in double, in any order. */
    double tl = 0.0, tc = 0.0, tn = 0.0;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) {
        tl += __ldcg(&partial[b].loss);
        tc += (double)__ldcg(&partial[b].correct);
        tn += (double)__ldcg(&partial[b].labelled);
    }
    __shared__ double s[32];
    tl = sdc_block_sum(tl, s);
    tc = sdc_block_sum(tc, s);
    tn = sdc_block_sum(tn, s);
    if (threadIdx.x != 0) return;
    stats[0] = __fadd_rn(stats[0], (float)tl);
    stats[1] = __fadd_rn(stats[1], (float)tc);
    stats[2] = __fadd_rn(stats[2], (float)tn);
    *ticket_word = 0;
}

/* The loss kernel's step values: the scale (argument 5) by value, no block (6). */
static void sdc_xent_set_values(sdc_step_node *n, const sdc_step *v) {
    *(float *)n->argv[5] = v->loss_scale;
    *(const sdc_step **)n->argv[6] = NULL;
}

bool sdc_xent_step_node(const cudaKernelNodeParams *p, sdc_step_node *out) {
    if (p->func != (void *)sdc_xent_kernel) return false;
    const size_t sizes[] = {sizeof(const float *), sizeof(const int32_t *), sizeof(int64_t), sizeof(int64_t),
                            sizeof(float *), sizeof(float), sizeof(const sdc_step *), sizeof(float *),
                            sizeof(sdc_xent_partial *), sizeof(uint32_t *), sizeof(int64_t)};
    /* Only a node recorded reading the block: one captured with a scale
     * by value keeps it. */
    return p->kernelParams && *(const sdc_step *const *)p->kernelParams[6] &&
           sdc_step_node_fill(p, out, sizes, (int)(sizeof sizes / sizeof sizes[0]), sdc_xent_set_values);
}

extern "C" int sdc_softmax_xent(const sdc_ctx *c, uint64_t logits, uint64_t labels, int64_t rows,
                                int64_t classes, uint64_t dlogits, float scale, int32_t use_block,
                                uint64_t stats) {
    if (!c || rows <= 0 || classes <= 0 || classes > 0x7ffffffe)
        return SD_FAIL(SD_ERR_ARG, "sdc_softmax_xent: %lld rows of %lld classes", (long long)rows,
                       (long long)classes);
    SD_TRY(sdc_use_device(c->device));
    /* About two blocks per SM, at least one row per warp. */
    const int64_t target = 2 * (int64_t)(c->sm_count > 0 ? c->sm_count : 1);
    int64_t per = (rows + target - 1) / target;
    per = (per + SDC_XENT_WARPS - 1) / SDC_XENT_WARPS * SDC_XENT_WARPS;
    int64_t blocks = (rows + per - 1) / per;
    const int64_t room = c->scratch_bytes / (int64_t)sizeof(sdc_xent_partial);
    if (blocks > room) {
        per = (rows + room - 1) / room;
        blocks = (rows + per - 1) / per;
    }
    SD_CUDA(sdc_launch(sdc_xent_kernel, dim3((unsigned)blocks), dim3(SDC_XENT_THREADS),
                       (cudaStream_t)(uintptr_t)c->stream, (const float *)(uintptr_t)logits,
                       (const int32_t *)(uintptr_t)labels, rows, classes, (float *)(uintptr_t)dlogits, scale,
                       use_block ? (const sdc_step *)(uintptr_t)c->step : NULL, (float *)(uintptr_t)stats,
                       (sdc_xent_partial *)(uintptr_t)c->scratch,
                       (uint32_t *)(uintptr_t)c->counters + SDC_XENT_COUNTER, per));
    return SD_OK;
}
