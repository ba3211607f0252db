/* Reductions over one block of dims, float32: sum, max and min (NaN-propagating, like torch.amax/amin).
 *
 * The input is seen as (outer, n, inner) with element strides (plast_op3 from softmax.h); out is contiguous
 * (outer, inner). Contiguous rows (inner == 1) reduce with several vector accumulators, sums in blocks of
 * float32 lanes added into double, so long rows stay accurate; a long single row splits across threads. A
 * contiguous inner dimension (reducing a leading dim) accumulates whole rows at a time.
 */
#ifndef PLAST_REDUCE_H
#define PLAST_REDUCE_H

#include <stddef.h>

#include "softmax.h"

enum { PLAST_RD_SUM = 0, PLAST_RD_MAX = 1, PLAST_RD_MIN = 2 };

int plast_reduce_f32(int simd, int nthreads, int op, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, plast_op3 x,
                     float *out);

#endif
