#include "reduce.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if PLAST_HAVE_OPENMP
#include <omp.h>
#endif

#define PLAST_VEC_BODY "reduce_simd.h"
#include "vec_levels.h"

#define GRAIN 32768
/* a long row splits into chunks of this many elements, reduced in parallel and combined in order */
#define CHUNK 65536
/* at most this many columns per task when reducing a leading dim (their accumulators stay in cache) */
#define COLS 4096

static int threads_for(int nthreads, ptrdiff_t work, ptrdiff_t tasks) {
    if (nthreads <= 1 || work < 2 * GRAIN || tasks < 2) return 1;
    ptrdiff_t t = work / GRAIN;
    if (t > tasks) t = tasks;
    return t < nthreads ? (int)t : nthreads;
}

static double run_contig(int simd, int op, const float *x, ptrdiff_t n) {
    if (op == PLAST_RD_SUM) return PLAST_VEC_CALL(rd_sum, x, n);
    return (double)PLAST_VEC_CALL(rd_ext, x, n, op == PLAST_RD_MAX);
}

static double combine(int op, double a, double b) {
    if (op == PLAST_RD_SUM) return a + b;
    if (a != a || b != b) return NAN;
    return op == PLAST_RD_MAX ? (a > b ? a : b) : (a < b ? a : b);
}

int plast_reduce_f32(int simd, int nthreads, int op, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, plast_op3 x,
                     float *out) {
    if (op < 0 || op > PLAST_RD_MIN) return -1;
    if (outer == 0 || inner == 0) return 0;
    if (n == 0) {
        if (op != PLAST_RD_SUM) return -1; /* max/min of nothing: the op layer raises before this */
        memset(out, 0, (size_t)(outer * inner) * sizeof(float));
        return 0;
    }
    if (inner == 1 && x.sn == 1) {
        ptrdiff_t per = (n + CHUNK - 1) / CHUNK;
        if (per > 1 && outer < 4 * (ptrdiff_t)nthreads) {
            /* few long rows: chunks in parallel, then each row's chunks combined in order */
            ptrdiff_t tasks = outer * per;
            double *part = malloc((size_t)tasks * sizeof(double));
            if (!part) return -2;
            int nt = threads_for(nthreads, outer * n, tasks);
            (void)nt; /* unused without OpenMP */
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
            for (ptrdiff_t t = 0; t < tasks; t++) {
                ptrdiff_t o = t / per, c = t % per, s = c * CHUNK;
                part[t] = run_contig(simd, op, x.p + o * x.so + s, n - s < CHUNK ? n - s : CHUNK);
            }
            for (ptrdiff_t o = 0; o < outer; o++) {
                double r = part[o * per];
                for (ptrdiff_t c = 1; c < per; c++) r = combine(op, r, part[o * per + c]);
                out[o] = (float)r;
            }
            free(part);
            return 0;
        }
        int nt = threads_for(nthreads, outer * n, outer);
        (void)nt; /* unused without OpenMP */
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
        for (ptrdiff_t o = 0; o < outer; o++) out[o] = (float)run_contig(simd, op, x.p + o * x.so, n);
        return 0;
    }
    if (x.si == 1) {
        /* whole rows per task where possible (contiguous streams); split columns only to feed the threads */
        int want = threads_for(nthreads, outer * n * inner, inner / 16 > 1 ? inner / 16 : 1);
        ptrdiff_t cols = outer >= want ? inner : (inner + want - 1) / want;
        cols = (cols + 15) & ~(ptrdiff_t)15;
        if (cols > COLS) cols = COLS;
        ptrdiff_t per = (inner + cols - 1) / cols, tasks = outer * per;
        int nt = threads_for(nthreads, outer * n * inner, tasks);
        (void)nt; /* unused without OpenMP */
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
        for (ptrdiff_t t = 0; t < tasks; t++) {
            ptrdiff_t o = t / per, j = (t % per) * cols;
            ptrdiff_t w = inner - j < cols ? inner - j : cols;
            PLAST_VEC_DISPATCH(rd_cols, op, x.p + o * x.so + j, x.sn, n, out + o * inner + j, w);
        }
        return 0;
    }
    /* anything else: plain strided loops */
    ptrdiff_t tasks = outer * inner;
    int nt = threads_for(nthreads, outer * n * inner, tasks);
    (void)nt; /* unused without OpenMP */
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (ptrdiff_t t = 0; t < tasks; t++) {
        const float *p = x.p + (t / inner) * x.so + (t % inner) * x.si;
        double r = op == PLAST_RD_SUM ? 0.0 : (double)p[0];
        for (ptrdiff_t k = op == PLAST_RD_SUM ? 0 : 1; k < n; k++) r = combine(op, r, (double)p[k * x.sn]);
        out[t] = (float)r;
    }
    return 0;
}
