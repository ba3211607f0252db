#include "layernorm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if PLAST_HAVE_OPENMP
#include <omp.h>
#endif

#define PLAST_VEC_BODY "layernorm_simd.h"
#include "vec_levels.h"

#define GRAIN 16384

static int threads_for(int nthreads, ptrdiff_t work, ptrdiff_t tasks) {
    if (nthreads <= 1 || work < 2 * GRAIN || tasks < 2) return 1;
    ptrdiff_t t = work / GRAIN;
    if (t > tasks) t = tasks;
    return t < nthreads ? (int)t : nthreads;
}

int plast_layer_norm_f32(int simd, int nthreads, ptrdiff_t rows, ptrdiff_t n, const float *x, ptrdiff_t x_row,
                         const float *w, const float *b, float eps, float *y, float *mean, float *rstd) {
    if (rows == 0) return 0;
    if (n == 0) {
        for (ptrdiff_t r = 0; r < rows; r++) mean[r] = rstd[r] = NAN;
        return 0;
    }
    int nt = threads_for(nthreads, rows * n, rows);
    (void)nt; /* unused without OpenMP */
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (ptrdiff_t r = 0; r < rows; r++)
        PLAST_VEC_DISPATCH(ln_row, x + r * x_row, w, b, eps, y + r * n, n, mean + r, rstd + r);
    return 0;
}

int plast_layer_norm_bw_f32(int simd, int nthreads, ptrdiff_t rows, ptrdiff_t n, const float *gy,
                            ptrdiff_t gy_row, const float *x, ptrdiff_t x_row, const float *mean, const float *rstd,
                            const float *w, float *gx, float *gw, float *gb) {
    memset(gw, 0, (size_t)n * sizeof(float));
    memset(gb, 0, (size_t)n * sizeof(float));
    if (rows == 0 || n == 0) return 0;
    int nt = threads_for(nthreads, rows * n, rows);
    (void)nt; /* unused without OpenMP */
    /* thread 0 accumulates straight into gw/gb; the others into scratch added at the end */
    float *scratch = NULL;
    if (nt > 1) {
        scratch = calloc((size_t)(nt - 1) * 2 * (size_t)n, sizeof(float));
        if (!scratch) return -2;
    }
#if PLAST_HAVE_OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int tid = 0;
#if PLAST_HAVE_OPENMP
        tid = omp_get_thread_num();
#endif
        float *gwa = tid == 0 ? gw : scratch + (size_t)(tid - 1) * 2 * (size_t)n;
        float *gba = tid == 0 ? gb : gwa + n;
#if PLAST_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
        for (ptrdiff_t r = 0; r < rows; r++)
            PLAST_VEC_DISPATCH(ln_bw_row, gy + r * gy_row, x + r * x_row, mean[r], rstd[r], w, gx + r * n, gwa, gba,
                               n);
    }
    for (int t = 1; t < nt; t++) {
        float *s = scratch + (size_t)(t - 1) * 2 * (size_t)n;
        PLAST_VEC_DISPATCH(ln_add, gw, s, n);
        PLAST_VEC_DISPATCH(ln_add, gb, s + n, n);
    }
    free(scratch);
    return 0;
}
