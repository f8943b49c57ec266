/*
 * xent_f32_sim.cpp: runs the fp32 softmax cross-entropy kernel of
 * cuda/sd_compute_loss.cu (the part between its "the fp32 kernel" and "the
 * fp32 kernel's step node" markers, which check.sh copies to
 * xent_f32_kernels.inc) on the CPU, as attention_f32_sim.cpp does the
 * attention's: one OS thread per CUDA thread, one block at a time, a
 * shuffle through a slot per thread between two barriers. Against
 * internal/hostloops' SoftmaxXentRow, written here again: the gradient to a
 * unit in the last place (the sum of exp is added in another order), the
 * arg-max and the counts exactly, the loss to 1e-12; rows of widths with and
 * without a multiple of four (the kernel's 16-byte and 4-byte forms),
 * fewer classes than lanes, ties, huge logits, padding rows, labels on the
 * arg-max (so that a wrong index shows in the count), several rows a warp
 * and several blocks (the last block's sum of the partials).
 */
#include <cstdio>
#include <random>

#include "sim.h"
#define __shared__ static
template <typename T>
static inline T __ldcg(const T *p) { return *p; }
static inline unsigned atomicAdd(uint32_t *p, unsigned v) { /* one block at a time */
    const unsigned old = *p;
    *p += v;
    return old;
}
typedef struct {
    float loss_scale;
} sdc_step;
static inline void sdc_wait_prior_grid() {}
/* sd_reduce.cuh's block sum: every thread gets the block's total */
static double sim_dslot[1024];
static inline double sdc_block_sum(double v, double *) {
    sim_dslot[threadIdx.x] = v;
    sim_bar->arrive_and_wait();
    double t = 0;
    for (unsigned i = 0; i < blockDim.x; i++) t += sim_dslot[i];
    sim_bar->arrive_and_wait();
    return t;
}
/* the kernel's __shared__ variables are static: one per block, as one block runs at a time */
#include "xent_f32_kernels.inc"

/* hostloops.SoftmaxXentRow */
static double reference_row(const float *x, float *g, int n, int y, float scale, bool *hit) {
    int best = 0;
    for (int j = 0; j < n; j++)
        if (x[j] > x[best]) best = j;
    const double m = x[best];
    double sum = 0;
    for (int j = 0; j < n; j++) {
        const double p = std::exp((double)x[j] - m);
        g[j] = (float)p;
        sum += p;
    }
    const double loss = std::log(sum) - ((double)x[y] - m);
    const double inv = (double)scale / sum;
    for (int j = 0; j < n; j++) g[j] = (float)((double)g[j] * inv);
    g[y] -= scale;
    *hit = best == y;
    return loss;
}

int main() {
    std::mt19937 gen(5);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    int bad = 0;
    const int shapes[][2] = {{3, 5}, {40, 4}, {33, 1000}, {70, 257}, {20, 4096}, {9, 50304}};
    for (auto &sh : shapes) {
        const int rows = sh[0], classes = sh[1];
        std::vector<float> x((size_t)rows * classes), want(x.size()), got(x.size(), NAN);
        std::vector<int32_t> labels(rows);
        for (int r = 0; r < rows; r++) {
            float *xr = &x[(size_t)r * classes];
            for (int j = 0; j < classes; j++) xr[j] = nd(gen);
            if (r % 5 == 1)
                for (int j = 0; j < classes; j++) xr[j] = std::round(xr[j]); /* ties */
            if (r % 7 == 2) xr[classes / 2] = 1e30f;                          /* huge */
            labels[r] = r % 6 == 3 ? -1 : (int32_t)(gen() % classes);
            if (r % 3 == 0) { /* a hit: the first arg-max, wherever it falls in a lane's vector */
                int best = 0;
                for (int j = 0; j < classes; j++)
                    if (xr[j] > xr[best]) best = j;
                labels[r] = best;
            }
        }
        const float scale = 0.25f;
        double wloss = 0;
        int wcorrect = 0, wlabelled = 0;
        for (int r = 0; r < rows; r++) {
            float *wr = &want[(size_t)r * classes];
            if (labels[r] < 0) {
                std::fill(wr, wr + classes, 0.0f);
                continue;
            }
            bool hit;
            wloss += reference_row(&x[(size_t)r * classes], wr, classes, labels[r], scale, &hit);
            wcorrect += hit;
            wlabelled++;
        }
        /* a few rows a block, as the launcher gives GPT-2's */
        const int64_t per = 2 * SDC_XENT_WARPS;
        const unsigned blocks = (unsigned)((rows + per - 1) / per);
        std::vector<sdc_xent_partial> partial(blocks);
        uint32_t ticket = 0;
        float stats[3] = {1, 2, 3};
        launch(blocks, SDC_XENT_THREADS, [&] {
            sdc_xent_kernel(x.data(), labels.data(), rows, classes, got.data(), scale, nullptr, stats,
                            partial.data(), &ticket, per);
        });
        for (size_t i = 0; i < got.size(); i++) {
            const double d = std::fabs((double)got[i] - (double)want[i]);
            if (!(d <= std::ldexp(std::fabs((double)want[i]), -23) + 1e-45)) {
                std::printf("%dx%d: dlogits[%zu] = %.9g, want %.9g\n", rows, classes, i, got[i], want[i]);
                bad++;
                break;
            }
        }
        if (!(std::fabs(stats[0] - (float)(1 + wloss)) <= 1e-6 * std::fabs(1 + wloss)) || stats[1] != 2 + wcorrect ||
            stats[2] != 3 + wlabelled || ticket != 0) {
            std::printf("%dx%d: stats %.9g %g %g (ticket %u), want %.9g %d %d\n", rows, classes, stats[0], stats[1],
                        stats[2], ticket, 1 + wloss, 2 + wcorrect, 3 + wlabelled);
            bad++;
        }
    }
    std::printf("%s: %d mismatches\n", bad ? "FAIL" : "ok", bad);
    return bad != 0;
}
