/* Conversions between float32 and the 16-bit floating types for plast's casts: bfloat16 (round to nearest even;
 * NaN becomes the quiet NaN 0x7fc0, as torch's scalar rounding) and IEEE float16 (round to nearest even, F16C's
 * rule). Contiguous arrays; the codes are plast's dtype codes (PLAST_DT_F32, PLAST_DT_BF16, PLAST_DT_F16 of
 * plast/_core/codes.h).
 */
#ifndef PLAST_CONVERT16_H
#define PLAST_CONVERT16_H

#include <stddef.h>

#include "codes.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = src[i] converted, for the pairs float32 <-> bfloat16 and float32 <-> float16; returns 0, or 1 (nothing
 * written) for any other pair. */
int plast_convert16(int simd, int nthreads, int src_code, const void *src, int dst_code, void *dst, ptrdiff_t n);

#ifdef __cplusplus
}
#endif

#endif /* PLAST_CONVERT16_H */
