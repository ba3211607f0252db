/* Reductions over one block of dims, float32 and float64: sum, max and min (NaN-propagating, like
 * torch.amax/amin).
 *
 * The input is seen as (outer, n, inner) with element strides (plast_op3 / plast_op3_f64 from softmax.h); out
 * is contiguous (outer, inner). Contiguous rows (inner == 1) reduce with several vector accumulators; a long
 * single row splits across threads and its chunks combine pairwise. A contiguous inner dimension (reducing a
 * leading dim) accumulates whole rows at a time.
 *
 * Sum accuracy: float32 adds blocks of float lanes into a double total, so long rows stay accurate. float64
 * sums pairwise (vector leaves of 256 elements, then a binary tree), like numpy's pairwise summation: the error
 * grows like log2(n) ulp, not n. Reducing a leading dim adds blocks of 64 rows into the total.
 */
#ifndef PLAST_REDUCE_H
#define PLAST_REDUCE_H

#include <stddef.h>

#include "codes.h" /* PLAST_RD_*: the reduce ops (plast/_core/codes.h) */
#include "softmax.h"

/* op: PLAST_RD_SUM, PLAST_RD_MAX or PLAST_RD_MIN */
int plast_reduce_f32(int simd, int nthreads, int op, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, plast_op3 x,
                     float *out);
int plast_reduce_f64(int simd, int nthreads, int op, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, plast_op3_f64 x,
                     double *out);

#endif
