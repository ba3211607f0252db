/* layer_norm forward (y, mean, rstd) and backward (gx, gw, gb) over rows of n elements, float32 and float64
 * (the _f64 entry points: the same code over doubles).
 *
 * Rows may sit at any row stride but their elements are contiguous (the caller copies other layouts). The
 * forward is two passes over a row held in L1 (mean, then the centred variance: no cancellation). The
 * backward accumulates gw and gb per thread and adds the partial sums at the end, so rows split across
 * threads without races.
 */
#ifndef PLAST_LAYERNORM_H
#define PLAST_LAYERNORM_H

#include <stddef.h>

#include "plast_simd.h"

/* w, b: NULL when absent. y rows are contiguous (row stride n); mean and rstd hold one value per row. */
int plast_layer_norm_f32(int simd, int nthreads, ptrdiff_t rows, ptrdiff_t n, const float *x, ptrdiff_t x_row,
                         const float *w, const float *b, float eps, float *y, float *mean, float *rstd);
/* gx rows contiguous; gw, gb (n each) always written. w NULL when absent. */
int plast_layer_norm_bw_f32(int simd, int nthreads, ptrdiff_t rows, ptrdiff_t n, const float *gy, ptrdiff_t gy_row,
                            const float *x, ptrdiff_t x_row, const float *mean, const float *rstd, const float *w,
                            float *gx, float *gw, float *gb);

int plast_layer_norm_f64(int simd, int nthreads, ptrdiff_t rows, ptrdiff_t n, const double *x, ptrdiff_t x_row,
                         const double *w, const double *b, double eps, double *y, double *mean, double *rstd);
int plast_layer_norm_bw_f64(int simd, int nthreads, ptrdiff_t rows, ptrdiff_t n, const double *gy, ptrdiff_t gy_row,
                            const double *x, ptrdiff_t x_row, const double *mean, const double *rstd, const double *w,
                            double *gx, double *gw, double *gb);

#endif
