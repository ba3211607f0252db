#include "softmax.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if PLAST_HAVE_OPENMP
#include <omp.h>
#endif

#define PLAST_VEC_BODY "softmax_simd.h"
#include "vec_levels.h"

/* Work (elements) below which a call stays on one thread. */
#define GRAIN 16384

static int threads_for(int nthreads, ptrdiff_t work, ptrdiff_t tasks) {
    if (nthreads <= 1 || work < 2 * GRAIN || tasks < 2) return 1;
    ptrdiff_t t = work / GRAIN;
    if (t > tasks) t = tasks;
    return t < nthreads ? (int)t : nthreads;
}

static void gather(float *dst, const float *src, ptrdiff_t s, ptrdiff_t n) {
    for (ptrdiff_t k = 0; k < n; k++) dst[k] = src[k * s];
}
static void scatter(float *dst, ptrdiff_t s, const float *src, ptrdiff_t n) {
    for (ptrdiff_t k = 0; k < n; k++) dst[k * s] = src[k];
}

int plast_softmax_f32(int simd, int nthreads, int mode, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner,
                      plast_op3 x, plast_op3 y) {
    if (outer == 0 || n == 0 || inner == 0) return 0;
    int cols = inner > 1 && x.si == 1 && y.si == 1;
    ptrdiff_t per = cols ? (inner + 15) / 16 : inner;
    ptrdiff_t tasks = outer * per;
    int nt = threads_for(nthreads, outer * n * inner, tasks);
    (void)nt; /* unused without OpenMP */
    int fail = 0;
#if PLAST_HAVE_OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        float *buf = NULL;
        if (!cols && (x.sn != 1 || y.sn != 1)) {
            buf = malloc((size_t)n * sizeof(float));
            if (!buf) fail = 1;
        }
#if PLAST_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
        for (ptrdiff_t t = 0; t < tasks; t++) {
            ptrdiff_t o = t / per, i = t % per;
            if (cols) {
                ptrdiff_t j = i * 16;
                int w = inner - j < 16 ? (int)(inner - j) : 16;
                PLAST_VEC_DISPATCH(softmax_cols16, mode, x.p + o * x.so + j, x.sn, y.p + o * y.so + j, y.sn, n, w);
                continue;
            }
            const float *xp = x.p + o * x.so + i * x.si;
            float *yp = y.p + o * y.so + i * y.si;
            if (!buf) {
                if (x.sn == 1 && y.sn == 1) PLAST_VEC_DISPATCH(softmax_row, mode, xp, yp, n);
                continue;
            }
            gather(buf, xp, x.sn, n);
            PLAST_VEC_DISPATCH(softmax_row, mode, buf, buf, n);
            scatter(yp, y.sn, buf, n);
        }
        free(buf);
    }
    return fail ? -2 : 0;
}

int plast_softmax_bw_f32(int simd, int nthreads, int mode, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner,
                         plast_op3 g, plast_op3 y, plast_op3 out) {
    if (outer == 0 || n == 0 || inner == 0) return 0;
    int cols = inner > 1 && g.si == 1 && y.si == 1 && out.si == 1;
    ptrdiff_t per = cols ? (inner + 15) / 16 : inner;
    ptrdiff_t tasks = outer * per;
    int nt = threads_for(nthreads, outer * n * inner, tasks);
    (void)nt; /* unused without OpenMP */
    int fail = 0;
#if PLAST_HAVE_OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        float *buf = NULL;
        if (!cols && (g.sn != 1 || y.sn != 1 || out.sn != 1)) {
            buf = malloc((size_t)n * 3 * sizeof(float));
            if (!buf) fail = 1;
        }
#if PLAST_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
        for (ptrdiff_t t = 0; t < tasks; t++) {
            ptrdiff_t o = t / per, i = t % per;
            if (cols) {
                ptrdiff_t j = i * 16;
                int w = inner - j < 16 ? (int)(inner - j) : 16;
                PLAST_VEC_DISPATCH(softmax_bw_cols16, mode, g.p + o * g.so + j, g.sn, y.p + o * y.so + j, y.sn,
                                   out.p + o * out.so + j, out.sn, n, w);
                continue;
            }
            const float *gp = g.p + o * g.so + i * g.si;
            const float *yp = y.p + o * y.so + i * y.si;
            float *op = out.p + o * out.so + i * out.si;
            if (!buf) {
                if (g.sn == 1 && y.sn == 1 && out.sn == 1) PLAST_VEC_DISPATCH(softmax_bw_row, mode, gp, yp, op, n);
                continue;
            }
            gather(buf, gp, g.sn, n);
            gather(buf + n, yp, y.sn, n);
            PLAST_VEC_DISPATCH(softmax_bw_row, mode, buf, buf + n, buf + 2 * n, n);
            scatter(op, out.sn, buf + 2 * n, n);
        }
        free(buf);
    }
    return fail ? -2 : 0;
}

int plast_logsumexp_f32(int simd, int nthreads, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, plast_op3 x,
                        plast_op3 out) {
    if (outer == 0 || inner == 0) return 0;
    if (n == 0) {
        for (ptrdiff_t o = 0; o < outer; o++)
            for (ptrdiff_t i = 0; i < inner; i++) out.p[o * out.so + i * out.si] = -INFINITY;
        return 0;
    }
    int cols = inner > 1 && x.si == 1;
    ptrdiff_t per = cols ? (inner + 15) / 16 : inner;
    ptrdiff_t tasks = outer * per;
    int nt = threads_for(nthreads, outer * n * inner, tasks);
    (void)nt; /* unused without OpenMP */
    int fail = 0;
#if PLAST_HAVE_OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        float *buf = NULL;
        if (!cols && x.sn != 1) {
            buf = malloc((size_t)n * sizeof(float));
            if (!buf) fail = 1;
        }
#if PLAST_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
        for (ptrdiff_t t = 0; t < tasks; t++) {
            ptrdiff_t o = t / per, i = t % per;
            if (cols) {
                ptrdiff_t j = i * 16;
                int w = inner - j < 16 ? (int)(inner - j) : 16;
                PLAST_VEC_DISPATCH(lse_cols16, x.p + o * x.so + j, x.sn, out.p + o * out.so + j * out.si, out.si,
                                   n, w);
                continue;
            }
            const float *xp = x.p + o * x.so + i * x.si;
            float r = 0.0f;
            if (x.sn == 1) {
                r = PLAST_VEC_CALL(lse_row, xp, n);
            } else if (buf) {
                gather(buf, xp, x.sn, n);
                r = PLAST_VEC_CALL(lse_row, buf, n);
            }
            out.p[o * out.so + i * out.si] = r;
        }
        free(buf);
    }
    return fail ? -2 : 0;
}
