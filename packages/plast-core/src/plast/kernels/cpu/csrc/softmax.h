/* softmax, log_softmax, their backward, and logsumexp over one (possibly strided) dimension, float32 and
 * float64 (the _f64 entry points: the same code over doubles, with a vectorized double exp).
 *
 * Every operand is seen as a 3-d array (outer, n, inner) with its own element strides; the reduction runs over
 * n. Rows that are contiguous (inner == 1, stride 1 along n) run through SIMD row loops; a contiguous inner
 * dimension (softmax over a non-last dim) is vectorized across inner; anything else is gathered into a
 * scratch row first. OpenMP splits rows (or column blocks) across threads.
 */
#ifndef PLAST_SOFTMAX_H
#define PLAST_SOFTMAX_H

#include <stddef.h>

#include "codes.h" /* PLAST_SM_* (the modes), PLAST_RD_* (reduce.h's ops): plast/_core/codes.h */
#include "plast_simd.h"

/* 3-d operand: base pointer and strides (outer, n, inner) in elements */
typedef struct {
    float *p;
    ptrdiff_t so, sn, si;
} plast_op3;
typedef struct {
    double *p;
    ptrdiff_t so, sn, si;
} plast_op3_f64;

/* y = softmax / safe softmax (all -inf rows give 0) / log_softmax of x along n. */
int plast_softmax_f32(int simd, int nthreads, int mode, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, plast_op3 x,
                      plast_op3 y);
/* out = y * (g - sum(g * y)) for softmax, g - exp(y) * sum(g) for log_softmax (y: the forward output). */
int plast_softmax_bw_f32(int simd, int nthreads, int mode, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, plast_op3 g,
                         plast_op3 y, plast_op3 out);
/* out[o, i] = log(sum_k exp(x[o, k, i])) (out strides: so for outer, si for inner; sn unused). */
int plast_logsumexp_f32(int simd, int nthreads, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, plast_op3 x,
                        plast_op3 out);

int plast_softmax_f64(int simd, int nthreads, int mode, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, plast_op3_f64 x,
                      plast_op3_f64 y);
int plast_softmax_bw_f64(int simd, int nthreads, int mode, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner,
                         plast_op3_f64 g, plast_op3_f64 y, plast_op3_f64 out);
int plast_logsumexp_f64(int simd, int nthreads, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, plast_op3_f64 x,
                        plast_op3_f64 out);

#endif
