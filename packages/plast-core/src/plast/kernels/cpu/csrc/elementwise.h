/* Elementwise kernels: binary arithmetic with numpy broadcasting over strided n-d operands.
 *
 * Strides are in elements. The n-d driver collapses dimensions, runs the innermost dimension through a
 * contiguous SIMD loop when every operand is contiguous or broadcast along it (stride 0 or 1), and splits the
 * work into chunks over `nthreads` OpenMP threads.
 */
#ifndef PLAST_ELEMENTWISE_H
#define PLAST_ELEMENTWISE_H

#include "codes.h" /* PLAST_BIN_*: the binary op codes; PLAST_DT_*: the dtype codes (plast/_core/codes.h) */
#include "plast_simd.h"

#define PLAST_MAX_NDIM 16

/* Contiguous 1-d kernels, every op below PLAST_BIN_COUNT. a_bcast / b_bcast: that operand is one value repeated
 * (stride 0). */
void plast_binary_contig_f32(int simd, int op, const float *a, int a_bcast, const float *b, int b_bcast, float *out,
                             ptrdiff_t n);
void plast_binary_contig_f64(int simd, int op, const double *a, int a_bcast, const double *b, int b_bcast, double *out,
                             ptrdiff_t n);

/* n-d driver. All three operands share `dtype`; op is below PLAST_BIN_COUNT (div, pow, floor_divide, remainder
 * fmod, atan2, copysign, nextafter, igamma and igammac: float dtypes only). Returns 0, or -1 for an unknown op/dtype. */
int plast_binary_nd(int simd, int nthreads, int op, int dtype, int ndim, const ptrdiff_t *shape, const char *a,
                    const ptrdiff_t *a_strides, const char *b, const ptrdiff_t *b_strides, char *out,
                    const ptrdiff_t *out_strides);

#endif
