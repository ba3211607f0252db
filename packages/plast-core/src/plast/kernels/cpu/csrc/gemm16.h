/* 16-bit GEMM for plast's CPU backend: bfloat16 or float16 operands, float32 accumulation.
 *
 *   C[M,N] = epilogue(alpha * op(A)[M,K] @ op(B)[K,N] + beta * C)
 *
 * Layout, transpose flags, epilogue and return values are those of gemm.h. A and B hold bfloat16
 * (plast_gemm_bf16) or IEEE binary16 (plast_gemm_f16) bit patterns. C is float32 (out16 = 0) or the operands'
 * 16-bit type (out16 = 1); the epilogue's pointers (biases, residual) have C's type. Every product of two 16-bit
 * numbers is exact in float32 and the sums accumulate in float32, as torch's CPU bf16/f16 matmul does; a 16-bit
 * C is rounded once, to nearest even, after the epilogue (torch's rounding: NaN becomes the quiet NaN 0x7fc0 for
 * bfloat16).
 *
 * Paths, by the SIMD level passed first (plast_simd.h; the level is clamped to what this CPU has):
 *   PLAST_SIMD_AMX          bfloat16 on AMX tiles: 32 x 32 blocks of C held in four 16 x 16 float32 tiles,
 *                           tdpbf16ps over packed operands (A in 16 x 32 tiles, B pair-interleaved)
 *   PLAST_SIMD_AVX512_BF16  bfloat16 with vdpbf16ps on the same packed operands, 8 x 32 register tiles
 *   lower levels            the operands widened to float32 and multiplied by plast_gemm_f32 at that level
 * float16 always takes the widening path: AVX512-FP16 would accumulate in float16 (less accurate than torch), and
 * AMX-FP16 is a later CPU generation's.
 */
#ifndef PLAST_GEMM16_H
#define PLAST_GEMM16_H

#include <stddef.h>
#include <stdint.h>

#include "gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

int plast_gemm_bf16(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K,
                    float alpha, const uint16_t *A, ptrdiff_t lda, const uint16_t *B, ptrdiff_t ldb, float beta,
                    void *C, ptrdiff_t ldc, int out16, const plast_gemm_epilogue *ep);

int plast_gemm_f16(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, float alpha,
                   const uint16_t *A, ptrdiff_t lda, const uint16_t *B, ptrdiff_t ldb, float beta, void *C,
                   ptrdiff_t ldc, int out16, const plast_gemm_epilogue *ep);

/* Which path plast_gemm_bf16 takes at this level on this CPU: PLAST_SIMD_AMX, PLAST_SIMD_AVX512_BF16, or the
 * (clamped) vector level of the widening path. */
int plast_gemm_bf16_path(int simd);

#ifdef __cplusplus
}
#endif

#endif /* PLAST_GEMM16_H */
