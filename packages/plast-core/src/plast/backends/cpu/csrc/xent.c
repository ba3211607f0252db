#include "xent.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if PLAST_HAVE_OPENMP
#include <omp.h>
#endif

#define PLAST_VEC_BODY "xent_simd.h"
#include "vec_levels.h"

#define GRAIN 16384

static int threads_for(int nthreads, ptrdiff_t work, ptrdiff_t tasks) {
    if (nthreads <= 1 || work < 2 * GRAIN || tasks < 2) return 1;
    ptrdiff_t t = work / GRAIN;
    if (t > tasks) t = tasks;
    return t < nthreads ? (int)t : nthreads;
}

static inline int64_t target_at(const int64_t *t64, const int32_t *t32, ptrdiff_t r) {
    return t64 ? t64[r] : (int64_t)t32[r];
}

/* Checks every target; returns the summed weight of the non-ignored ones (the mean's divisor). */
static int check_targets(ptrdiff_t rows, ptrdiff_t k, const int64_t *t64, const int32_t *t32, const float *w,
                         int64_t ignore_index, double *wsum, int64_t *bad) {
    double s = 0.0;
    for (ptrdiff_t r = 0; r < rows; r++) {
        int64_t t = target_at(t64, t32, r);
        if (t == ignore_index) continue;
        if (t < 0 || t >= k) {
            *bad = t;
            return PLAST_XENT_BAD_TARGET;
        }
        s += w ? (double)w[t] : 1.0;
    }
    *wsum = s;
    return 0;
}

/* A row of logits as a contiguous pointer: the row itself, or a copy gathered into buf. */
static const float *row_of(plast_op3 x, ptrdiff_t o, ptrdiff_t i, ptrdiff_t k, float *buf) {
    const float *p = x.p + o * x.so + i * x.si;
    if (x.sn == 1) return p;
    for (ptrdiff_t c = 0; c < k; c++) buf[c] = p[c * x.sn];
    return buf;
}

int plast_xent_fwd_f32(int simd, int nthreads, ptrdiff_t outer, ptrdiff_t k, ptrdiff_t inner, plast_op3 x,
                       const int64_t *t64, const int32_t *t32, const float *w, int64_t ignore_index, float eps,
                       int reduction, float *out, int64_t *bad) {
    ptrdiff_t rows = outer * inner;
    double wsum = 0.0;
    int rc = check_targets(rows, k, t64, t32, w, ignore_index, &wsum, bad);
    if (rc) return rc;
    double wall = 0.0; /* sum of all class weights, for the smoothing term */
    for (ptrdiff_t c = 0; c < k; c++) wall += w ? (double)w[c] : 1.0;
    double total = 0.0;
    int fail = 0;
    int nt = threads_for(nthreads, rows * k, rows);
    (void)nt; /* unused without OpenMP */
#if PLAST_HAVE_OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(+ : total)
#endif
    {
        float *buf = NULL;
        if (x.sn != 1 && !(buf = malloc((size_t)k * sizeof(float)))) fail = 1;
#if PLAST_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
        for (ptrdiff_t r = 0; r < rows; r++) {
            int64_t t = target_at(t64, t32, r);
            float loss = 0.0f;
            if (t != ignore_index && (x.sn == 1 || buf)) {
                const float *row = row_of(x, r / inner, r % inner, k, buf);
                float lse = PLAST_VEC_CALL(xe_lse, row, k);
                float wt = w ? w[t] : 1.0f;
                loss = -(row[t] - lse) * wt;
                if (eps != 0.0f) {
                    float smooth = -(PLAST_VEC_CALL(xe_wsum, row, w, k) - lse * (float)wall);
                    loss = (1.0f - eps) * loss + eps / (float)k * smooth;
                }
            }
            if (reduction == PLAST_RED_NONE) out[r] = loss;
            else total += loss;
        }
        free(buf);
    }
    if (fail) return -2;
    if (reduction == PLAST_RED_MEAN) out[0] = (float)(total / wsum);
    else if (reduction == PLAST_RED_SUM) out[0] = (float)total;
    return 0;
}

int plast_xent_bw_f32(int simd, int nthreads, ptrdiff_t outer, ptrdiff_t k, ptrdiff_t inner, plast_op3 x,
                      const int64_t *t64, const int32_t *t32, const float *w, int64_t ignore_index, float eps,
                      int reduction, const float *g, plast_op3 gx, int64_t *bad) {
    ptrdiff_t rows = outer * inner;
    double wsum = 0.0;
    int rc = check_targets(rows, k, t64, t32, w, ignore_index, &wsum, bad);
    if (rc) return rc;
    double wall = 0.0;
    for (ptrdiff_t c = 0; c < k; c++) wall += w ? (double)w[c] : 1.0;
    float dn = reduction == PLAST_RED_MEAN ? (float)wsum : 1.0f;
    int fail = 0;
    int nt = threads_for(nthreads, rows * k, rows);
    (void)nt; /* unused without OpenMP */
#if PLAST_HAVE_OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        float *buf = NULL;
        int strided = x.sn != 1 || gx.sn != 1;
        if (strided && !(buf = malloc((size_t)k * 2 * sizeof(float)))) fail = 1;
#if PLAST_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
        for (ptrdiff_t r = 0; r < rows; r++) {
            if (strided && !buf) continue;
            ptrdiff_t o = r / inner, i = r % inner;
            int64_t t = target_at(t64, t32, r);
            float *gp = gx.p + o * gx.so + i * gx.si;
            float *grow = strided ? buf + k : gp;
            if (t == ignore_index) {
                memset(grow, 0, (size_t)k * sizeof(float));
            } else {
                const float *row = row_of(x, o, i, k, buf);
                float lse = PLAST_VEC_CALL(xe_lse, row, k);
                float wt = w ? w[t] : 1.0f;
                float scale = (reduction == PLAST_RED_NONE ? g[r] : g[0]) / dn;
                /* C_c = (1 - eps) wt [c == t] + eps / k * w_c; gx = scale * (p * sum_c C_c - C) */
                float a = (1.0f - eps) * wt + eps / (float)k * (float)wall;
                PLAST_VEC_DISPATCH(xe_grad, row, w, grow, k, lse, scale, a, eps / (float)k);
                grow[t] -= scale * (1.0f - eps) * wt;
            }
            if (strided)
                for (ptrdiff_t c = 0; c < k; c++) gp[c * gx.sn] = grow[c];
        }
        free(buf);
    }
    return fail ? -2 : 0;
}
