/* Interface between the GEMM driver (gemm.c) and the per-ISA kernel sets (gemm_scalar.c, gemm_avx2.c,
 * gemm_avx512.c). Each kernel set is one instantiation of gemm_kernels.h for one element type and ISA. */
#ifndef PLAST_GEMM_INTERNAL_H
#define PLAST_GEMM_INTERNAL_H

#include <math.h>
#include <stddef.h>

#include "gemm.h"
#include "plast_simd.h"

/* This thread's packing buffer (gemm.c), at least `bytes` long and 64-byte aligned; NULL when out of memory. One
 * buffer per thread, reused by the next call: a caller must not hold it across another GEMM call. */
void *plast_gemm_scratch(size_t bytes);

/* `simd` lowered to the best level this CPU has (gemm.c): no path runs that the CPU lacks. */
int plast_gemm_clamp_simd(int simd);

/* Scalar math the kernel template calls by element type. */
static inline float gemm_exp_f32(float x) { return expf(x); }
static inline double gemm_exp_f64(double x) { return exp(x); }
static inline float gemm_erfc_f32(float x) { return erfcf(x); }
static inline double gemm_erfc_f64(double x) { return erfc(x); }

/* Epilogue with typed pointers, offset so that index (0, 0) is the origin of the block being computed. */
#define PLAST_GEMM_DECLARE_TYPES(T, S)                                                                                 \
    typedef struct {                                                                                                   \
        const T *bias_col;                                                                                             \
        const T *bias_row;                                                                                             \
        const T *res;                                                                                                  \
        ptrdiff_t ldr;                                                                                                 \
        int act;                                                                                                       \
    } gemm_ep_##S;                                                                                                     \
                                                                                                                       \
    typedef struct {                                                                                                   \
        int mr, nr;     /* micro-tile: rows of op(A), columns of op(B) */                                              \
        int kc, nb, mb; /* cache blocks: depth, columns of packed B (L2), rows of packed A */                          \
        /* pa[(i/mr)*mr*k + kk*mr + i%mr] = op(A)[i, kk] for a block of m rows, k columns */                           \
        void (*pack_a)(int trans_a, const T *A_mk, ptrdiff_t lda, ptrdiff_t m, ptrdiff_t k, T *pa);                    \
        /* pb[(j/nr)*nr*k + kk*nr + j%nr] = op(B)[kk, j], zero-padded to a multiple of nr columns */                   \
        void (*pack_b)(int trans_b, const T *B_kn, ptrdiff_t ldb, ptrdiff_t k, ptrdiff_t n, T *pb);                    \
        /* C_mn = alpha * pa @ b + beta * C_mn (beta == 0: C not read), then ep when not NULL.                \
           b is packed (b_packed = 1) or row-major op(B) with row stride ldb. */        \
        void (*macro)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, T alpha, const T *pa, const T *b, ptrdiff_t ldb,          \
                      int b_packed, T beta, T *C_mn, ptrdiff_t ldc, const gemm_ep_##S *ep);                            \
        /* C_mn = beta * C_mn (beta == 0: C not read), then ep when not NULL. */                                       \
        void (*scale_ep)(ptrdiff_t m, ptrdiff_t n, T beta, T *C_mn, ptrdiff_t ldc, const gemm_ep_##S *ep);             \
        /* C_mn = alpha * A @ B^T + beta * C_mn, then ep, for few rows: A row-major [m, k], B stored [n, k]. */        \
        void (*dot_rows)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, T alpha, const T *A, ptrdiff_t lda, const T *B,        \
                         ptrdiff_t ldb, T beta, T *C_mn, ptrdiff_t ldc, const gemm_ep_##S *ep);                        \
    } gemm_kernels_##S;

PLAST_GEMM_DECLARE_TYPES(float, f32)
PLAST_GEMM_DECLARE_TYPES(double, f64)

extern const gemm_kernels_f32 plast_gemm_kernels_f32_scalar;
extern const gemm_kernels_f64 plast_gemm_kernels_f64_scalar;
#if PLAST_X86
extern const gemm_kernels_f32 plast_gemm_kernels_f32_avx2;
extern const gemm_kernels_f64 plast_gemm_kernels_f64_avx2;
extern const gemm_kernels_f32 plast_gemm_kernels_f32_avx512;
extern const gemm_kernels_f64 plast_gemm_kernels_f64_avx512;
#endif

#endif /* PLAST_GEMM_INTERNAL_H */
