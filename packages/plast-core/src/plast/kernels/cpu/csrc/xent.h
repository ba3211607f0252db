/* Cross-entropy with class-index targets, forward and backward, float32 and float64 (_f64: the same code over
 * doubles): log-softmax over the class dim fused with the NLL gather, class weights, ignore_index and label
 * smoothing, as torch.nn.functional.cross_entropy.
 *
 * Logits are (outer, k, inner) with element strides (plast_op3 / plast_op3_f64 from softmax.h); targets are
 * contiguous int64 or int32, one per (outer, inner) position. Targets are checked first: a value outside
 * [0, k) that is not ignore_index makes the call return PLAST_XENT_BAD_TARGET with the value in *bad, before
 * anything is written.
 */
#ifndef PLAST_XENT_H
#define PLAST_XENT_H

#include <stddef.h>
#include <stdint.h>

#include "softmax.h"

#define PLAST_XENT_BAD_TARGET (-3)
#include "codes.h" /* PLAST_RED_*: the reductions (plast/_core/codes.h) */

/* out: one loss per position (reduction none, contiguous) or the reduced scalar. w: NULL or k weights. */
int plast_xent_fwd_f32(int simd, int nthreads, ptrdiff_t outer, ptrdiff_t k, ptrdiff_t inner, plast_op3 x,
                       const int64_t *t64, const int32_t *t32, const float *w, int64_t ignore_index, float eps,
                       int reduction, float *out, int64_t *bad);
/* gx (same op3 layout rules) = g * d loss / d x; g: one value (mean/sum) or one per position (none). */
int plast_xent_bw_f32(int simd, int nthreads, ptrdiff_t outer, ptrdiff_t k, ptrdiff_t inner, plast_op3 x,
                      const int64_t *t64, const int32_t *t32, const float *w, int64_t ignore_index, float eps,
                      int reduction, const float *g, plast_op3 gx, int64_t *bad);

int plast_xent_fwd_f64(int simd, int nthreads, ptrdiff_t outer, ptrdiff_t k, ptrdiff_t inner, plast_op3_f64 x,
                       const int64_t *t64, const int32_t *t32, const double *w, int64_t ignore_index, double eps,
                       int reduction, double *out, int64_t *bad);
int plast_xent_bw_f64(int simd, int nthreads, ptrdiff_t outer, ptrdiff_t k, ptrdiff_t inner, plast_op3_f64 x,
                      const int64_t *t64, const int32_t *t32, const double *w, int64_t ignore_index, double eps,
                      int reduction, const double *g, plast_op3_f64 gx, int64_t *bad);

#endif
