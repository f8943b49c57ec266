/*
 * layernorm_f32_sim.cpp: runs the fp32 layer norm kernels of
 * cuda/sd_compute_layernorm.cu (the part between its "the fp32 kernels" and
 * "bf16" markers, which check.sh copies to layernorm_f32_kernels.inc) on the
 * CPU (sim.h). The backward's dx and dw, db must give internal/hostloops'
 * goLayerNormBackward's bits, written here again in its order (sum8 of the
 * row sums, dw and db added row by row from 0), at row counts over several
 * of dw/db's tiles and a partial one, widths with and without a tail past a
 * multiple of eight, with dx written and added. Not what only a GPU shows
 * (the memory model, bank conflicts, speed).
 */
#include <cstdio>
#include <random>

#include "sim.h"
#define __shared__ static /* one block runs at a time */
/* sd_compute.cuh's eight-lane sums, as there */
static inline void sdc_lanes8(float mine, float v[8]) {
    for (int i = 0; i < 8; i++) v[i] = __shfl_sync(0xffffffffu, mine, i, 8);
}
static inline float sdc_tree8(const float v[8]) {
    return __fadd_rn(__fadd_rn(__fadd_rn(v[0], v[1]), __fadd_rn(v[2], v[3])),
                     __fadd_rn(__fadd_rn(v[4], v[5]), __fadd_rn(v[6], v[7])));
}
static inline float sdc_sum8(float mine) {
    float v[8];
    sdc_lanes8(mine, v);
    return sdc_tree8(v);
}
#include "layernorm_f32_kernels.inc"

/* goLayerNormBackward (internal/hostloops/layernorm.go) in its order. */
static void reference(std::vector<float> &dx, std::vector<float> &dw, std::vector<float> &db,
                      const std::vector<float> &dy, const std::vector<float> &x, const std::vector<float> &w,
                      const std::vector<float> &mean, const std::vector<float> &rstd, int rows, int c, bool add) {
    std::fill(dw.begin(), dw.end(), 0.0f);
    std::fill(db.begin(), db.end(), 0.0f);
    const int lead = c & ~7;
    const float fc = (float)c;
    for (int i = 0; i < rows; i++) {
        const float *xr = &x[(size_t)i * c], *dyr = &dy[(size_t)i * c];
        float *dxr = &dx[(size_t)i * c];
        const float m = mean[i], rs = rstd[i];
        float a[8] = {}, b[8] = {};
        for (int j = 0; j < lead; j += 8)
            for (int l = 0; l < 8; l++) {
                const float g = w[j + l] * dyr[j + l];
                a[l] += g;
                b[l] += g * ((xr[j + l] - m) * rs);
            }
        float sg = sdc_tree8(a), sgn = sdc_tree8(b);
        for (int j = lead; j < c; j++) {
            const float g = w[j] * dyr[j];
            sg += g;
            sgn += g * ((xr[j] - m) * rs);
        }
        const float mg = sg / fc, mgn = sgn / fc;
        for (int j = 0; j < c; j++) {
            const float n = (xr[j] - m) * rs, d = dyr[j], g = w[j] * d;
            const float gx = ((g - mg) - n * mgn) * rs;
            dxr[j] = add ? dxr[j] + gx : gx;
            db[j] += d;
            dw[j] += n * d;
        }
    }
}

static int differ(const char *what, const std::vector<float> &got, const std::vector<float> &want) {
    for (size_t i = 0; i < got.size(); i++)
        if (std::memcmp(&got[i], &want[i], 4) != 0) {
            std::printf("%s: element %zu is %.9g, want %.9g (bits differ)\n", what, i, got[i], want[i]);
            return 1;
        }
    return 0;
}

int main() {
    std::mt19937 g(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    int bad = 0;
    const int shapes[][2] = {{37, 8}, {37, 13}, {9, 72}, {5, 771}, {3, 20}, {1700, 9}, {1030, 24}, {2, 1024}, {600, 19}};
    for (auto &sh : shapes) {
        const int rows = sh[0], c = sh[1];
        const size_t n = (size_t)rows * c;
        std::vector<float> x(n), dy(n), w(c), mean(rows), rstd(rows), dx0(n);
        for (auto &v : x) v = 3 * nd(g) + 1;
        for (auto &v : dy) v = nd(g);
        for (auto &v : w) v = 1 + 0.5f * nd(g);
        for (auto &v : dx0) v = nd(g);
        for (int i = 0; i < rows; i++) mean[i] = 1 + 0.1f * nd(g), rstd[i] = 0.3f + 0.01f * std::fabs(nd(g));
        for (int add = 0; add < 2; add++) {
            std::vector<float> want = dx0, wdw(c), wdb(c);
            reference(want, wdw, wdb, dy, x, w, mean, rstd, rows, c, add);
            char what[96];
            std::vector<float> got = dx0;
            launch((unsigned)((rows + SDC_LN_THREADS / 8 - 1) / (SDC_LN_THREADS / 8)), SDC_LN_THREADS, [&] {
                sdc_layer_norm_dx_kernel(got.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(), rows,
                                         c, add);
            });
            std::snprintf(what, sizeof what, "dx %dx%d add %d", rows, c, add);
            bad += differ(what, got, want);
            if (add) continue;
            std::vector<float> dw(c, NAN), db(c, NAN);
            launch((unsigned)((c + SDC_LN_DW_COLS - 1) / SDC_LN_DW_COLS), SDC_LN_DW_THREADS, [&] {
                sdc_layer_norm_dwdb_kernel(dw.data(), db.data(), dy.data(), x.data(), mean.data(), rstd.data(),
                                           rows, c);
            });
            std::snprintf(what, sizeof what, "dw %dx%d", rows, c);
            bad += differ(what, dw, wdw);
            std::snprintf(what, sizeof what, "db %dx%d", rows, c);
            bad += differ(what, db, wdb);
        }
    }
    std::printf("%s: %d mismatches\n", bad ? "FAIL" : "ok", bad);
    return bad != 0;
}
