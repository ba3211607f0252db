/* General matrix multiply for plast's CPU backend (float32 and float64).
 *
 *   C[M,N] = epilogue(alpha * op(A)[M,K] @ op(B)[K,N] + beta * C)
 *
 * All matrices are row-major with a leading dimension (elements between consecutive rows). A transpose flag
 * means the operand is stored transposed: with trans_a, A is stored [K,M] and op(A) = A^T. Transposition is
 * absorbed by the packing routines; nothing is ever copied into a transposed temporary.
 *
 * Epilogue, applied once to every output element after the last partial product has been accumulated:
 *
 *   out[i,j] = act(alpha * sum_k op(A)[i,k] op(B)[k,j] + beta * C[i,j] + bias_col[j] + bias_row[i]) + R[i,j]
 *
 * beta == 0 never reads C (it may hold NaN); beta == 1 accumulates into C (gradient sums). Each epilogue
 * pointer may be NULL. bias_col is the Linear layer's bias (length N); R is a residual [M,N] with its own
 * leading dimension. C must not overlap A, B, the biases or R.
 *
 * Every entry point takes the SIMD level (PLAST_SIMD_*) first so tests can force each path, and a thread count
 * that is an upper bound: small problems run on one thread. Return value: 0, or PLAST_GEMM_ENOMEM when a packing
 * buffer could not be allocated (C is then unspecified).
 *
 * Blocking follows the BLIS design (Van Zee & van de Geijn, "BLIS: A Framework for Rapidly Instantiating BLAS
 * Functionality", 2015): pack a block of op(A) and a block of op(B) into micro-panels, then run a register-tiled
 * micro-kernel over them. Small problems skip packing B when it would not pay back.
 */
#ifndef PLAST_GEMM_H
#define PLAST_GEMM_H

#include <stddef.h>

#include "plast_simd.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLAST_GEMM_OK     0
#define PLAST_GEMM_ENOMEM 1

#include "codes.h" /* PLAST_ACT_*: the epilogue's activations (plast/_core/codes.h) */

/* Pointers have the element type of C (float for the _f32 entry points, double for _f64). */
typedef struct plast_gemm_epilogue {
    const void *bias_col;       /* [N] or NULL: added to every row */
    const void *bias_row;       /* [M] or NULL: added to every column */
    int act;                    /* PLAST_ACT_* */
    const void *residual;       /* [M,N] or NULL: added after the activation */
    ptrdiff_t ldr;              /* leading dimension of residual */
    ptrdiff_t residual_bstride; /* batched entry points: elements between batches' residuals (0 = shared) */
} plast_gemm_epilogue;

int plast_gemm_f32(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, float alpha,
                   const float *A, ptrdiff_t lda, const float *B, ptrdiff_t ldb, float beta, float *C, ptrdiff_t ldc,
                   const plast_gemm_epilogue *ep);

int plast_gemm_f64(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K,
                   double alpha, const double *A, ptrdiff_t lda, const double *B, ptrdiff_t ldb, double beta, double *C,
                   ptrdiff_t ldc, const plast_gemm_epilogue *ep);

/* batch independent products. stride_a / stride_b are elements between consecutive batches' operands; 0
 * broadcasts one operand to every batch. stride_c must separate the outputs (no two batches may write the same
 * element). The epilogue's biases are shared by all batches; the residual steps by ep->residual_bstride. */
int plast_gemm_batched_f32(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t batch, ptrdiff_t M, ptrdiff_t N,
                           ptrdiff_t K, float alpha, const float *A, ptrdiff_t lda, ptrdiff_t stride_a, const float *B,
                           ptrdiff_t ldb, ptrdiff_t stride_b, float beta, float *C, ptrdiff_t ldc, ptrdiff_t stride_c,
                           const plast_gemm_epilogue *ep);

int plast_gemm_batched_f64(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t batch, ptrdiff_t M, ptrdiff_t N,
                           ptrdiff_t K, double alpha, const double *A, ptrdiff_t lda, ptrdiff_t stride_a,
                           const double *B, ptrdiff_t ldb, ptrdiff_t stride_b, double beta, double *C, ptrdiff_t ldc,
                           ptrdiff_t stride_c, const plast_gemm_epilogue *ep);

/* outer x batch products: operand (o, b) of X at X + o * ostride_x + b * stride_x (stride or ostride 0
 * broadcasts). Every (o, b) must have its own output. The epilogue's residual steps by ep->residual_bstride over b
 * only (the same for every o). One parallel region for all the products when they are small. */
int plast_gemm_batched2_f32(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t outer, ptrdiff_t batch,
                            ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, float alpha, const float *A, ptrdiff_t lda,
                            ptrdiff_t stride_a, ptrdiff_t ostride_a, const float *B, ptrdiff_t ldb, ptrdiff_t stride_b,
                            ptrdiff_t ostride_b, float beta, float *C, ptrdiff_t ldc, ptrdiff_t stride_c,
                            ptrdiff_t ostride_c, const plast_gemm_epilogue *ep);

int plast_gemm_batched2_f64(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t outer, ptrdiff_t batch,
                            ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, double alpha, const double *A, ptrdiff_t lda,
                            ptrdiff_t stride_a, ptrdiff_t ostride_a, const double *B, ptrdiff_t ldb, ptrdiff_t stride_b,
                            ptrdiff_t ostride_b, double beta, double *C, ptrdiff_t ldc, ptrdiff_t stride_c,
                            ptrdiff_t ostride_c, const plast_gemm_epilogue *ep);

#ifdef __cplusplus
}
#endif

#endif /* PLAST_GEMM_H */
