/* Unary elementwise kernels: vectorized float32 math (vmath_simd.h) on every SIMD level (but asin..i1: libm
 * and _core/special.h loops); float64 vectorized for
 * exp, sqrt, rsqrt, sigmoid, relu, abs, neg, silu, reciprocal, square, sign, gelu_tanh (vmath_f64_simd.h) and
 * the roundings (floor, ceil, trunc, round half to even), libm loops for the rest; an n-d driver for strided inputs, OpenMP over chunks for large sizes.
 */
#ifndef PLAST_UNARY_H
#define PLAST_UNARY_H

#include <stddef.h>

#include "codes.h" /* PLAST_UN_*: the unary op codes; PLAST_DT_*: the dtype codes (plast/_core/codes.h) */
#include "plast_simd.h"

/* Contiguous 1-d kernels on the calling thread; x and y may be the same array; op is below PLAST_UN_COUNT. */
void plast_unary_contig_f32(int simd, int op, const float *x, float *y, ptrdiff_t n);
void plast_unary_contig_f64(int op, const double *x, double *y, ptrdiff_t n); /* libm loops, every op */
void plast_unary_contig_f64_simd(int simd, int op, const double *x, double *y, ptrdiff_t n);

/* n-d driver: y = op(x) over `shape`, strides in elements. dtype: PLAST_DT_F32 or PLAST_DT_F64.
 * Returns 0, or -1 for an unknown op or dtype. */
int plast_unary_nd(int simd, int nthreads, int op, int dtype, int ndim, const ptrdiff_t *shape, const char *x,
                   const ptrdiff_t *x_strides, char *y, const ptrdiff_t *y_strides);

#endif
