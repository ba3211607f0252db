# Declarations of plast's CPU GEMM (csrc/gemm.h) for other Cython modules.
#
# Two ways in:
# - cimport the exported cdef functions below (gemm_f32, gemm_f64, gemm_batched_f32, gemm_batched_f64): they are
#   reached through this module at import time, so the caller links nothing. This is what the engine uses with
#   arena pointers.
# - or call the plast_gemm_* C functions directly from a module that also lists the gemm C sources in its
#   `# distutils: sources` line.
# The calls take no GIL and return 0, or PLAST_GEMM_ENOMEM when a packing buffer could not be allocated.

cdef extern from "gemm.h" nogil:
    int PLAST_GEMM_OK
    int PLAST_GEMM_ENOMEM
    int PLAST_ACT_NONE
    int PLAST_ACT_RELU
    int PLAST_ACT_GELU_TANH
    int PLAST_ACT_GELU_ERF

    ctypedef struct plast_gemm_epilogue:
        const void *bias_col
        const void *bias_row
        int act
        const void *residual
        Py_ssize_t ldr
        Py_ssize_t residual_bstride

    int plast_gemm_f32(int simd, int nthreads, int trans_a, int trans_b, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
                       float alpha, const float *A, Py_ssize_t lda, const float *B, Py_ssize_t ldb, float beta,
                       float *C, Py_ssize_t ldc, const plast_gemm_epilogue *ep)
    int plast_gemm_f64(int simd, int nthreads, int trans_a, int trans_b, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
                       double alpha, const double *A, Py_ssize_t lda, const double *B, Py_ssize_t ldb, double beta,
                       double *C, Py_ssize_t ldc, const plast_gemm_epilogue *ep)
    int plast_gemm_batched_f32(int simd, int nthreads, int trans_a, int trans_b, Py_ssize_t batch, Py_ssize_t M,
                               Py_ssize_t N, Py_ssize_t K, float alpha, const float *A, Py_ssize_t lda,
                               Py_ssize_t stride_a, const float *B, Py_ssize_t ldb, Py_ssize_t stride_b, float beta,
                               float *C, Py_ssize_t ldc, Py_ssize_t stride_c, const plast_gemm_epilogue *ep)
    int plast_gemm_batched_f64(int simd, int nthreads, int trans_a, int trans_b, Py_ssize_t batch, Py_ssize_t M,
                               Py_ssize_t N, Py_ssize_t K, double alpha, const double *A, Py_ssize_t lda,
                               Py_ssize_t stride_a, const double *B, Py_ssize_t ldb, Py_ssize_t stride_b,
                               double beta, double *C, Py_ssize_t ldc, Py_ssize_t stride_c,
                               const plast_gemm_epilogue *ep)
    int plast_gemm_batched2_f32(int simd, int nthreads, int trans_a, int trans_b, Py_ssize_t outer, Py_ssize_t batch,
                                Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, float alpha, const float *A, Py_ssize_t lda,
                                Py_ssize_t stride_a, Py_ssize_t ostride_a, const float *B, Py_ssize_t ldb,
                                Py_ssize_t stride_b, Py_ssize_t ostride_b, float beta, float *C, Py_ssize_t ldc,
                                Py_ssize_t stride_c, Py_ssize_t ostride_c, const plast_gemm_epilogue *ep)
    int plast_gemm_batched2_f64(int simd, int nthreads, int trans_a, int trans_b, Py_ssize_t outer, Py_ssize_t batch,
                                Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, double alpha, const double *A,
                                Py_ssize_t lda, Py_ssize_t stride_a, Py_ssize_t ostride_a, const double *B,
                                Py_ssize_t ldb, Py_ssize_t stride_b, Py_ssize_t ostride_b, double beta, double *C,
                                Py_ssize_t ldc, Py_ssize_t stride_c, Py_ssize_t ostride_c,
                                const plast_gemm_epilogue *ep)


# The same products with the run-time SIMD level and thread count (plast.kernels.cpu._runtime) filled in.
# C_mn = act(alpha * op(A) @ op(B) + beta * C + bias) + residual; ep may be NULL.
cdef int gemm_f32(bint trans_a, bint trans_b, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, float alpha,
                  const float *A, Py_ssize_t lda, const float *B, Py_ssize_t ldb, float beta, float *C,
                  Py_ssize_t ldc, const plast_gemm_epilogue *ep) noexcept nogil
cdef int gemm_f64(bint trans_a, bint trans_b, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, double alpha,
                  const double *A, Py_ssize_t lda, const double *B, Py_ssize_t ldb, double beta, double *C,
                  Py_ssize_t ldc, const plast_gemm_epilogue *ep) noexcept nogil
cdef int gemm_batched_f32(bint trans_a, bint trans_b, Py_ssize_t batch, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
                          float alpha, const float *A, Py_ssize_t lda, Py_ssize_t stride_a, const float *B,
                          Py_ssize_t ldb, Py_ssize_t stride_b, float beta, float *C, Py_ssize_t ldc,
                          Py_ssize_t stride_c, const plast_gemm_epilogue *ep) noexcept nogil
cdef int gemm_batched_f64(bint trans_a, bint trans_b, Py_ssize_t batch, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
                          double alpha, const double *A, Py_ssize_t lda, Py_ssize_t stride_a, const double *B,
                          Py_ssize_t ldb, Py_ssize_t stride_b, double beta, double *C, Py_ssize_t ldc,
                          Py_ssize_t stride_c, const plast_gemm_epilogue *ep) noexcept nogil
# outer x batch products, operand (o, b) at X + o * ostride_x + b * stride_x (csrc/gemm.h)
cdef int gemm_batched2_f32(bint trans_a, bint trans_b, Py_ssize_t outer, Py_ssize_t batch, Py_ssize_t M, Py_ssize_t N,
                           Py_ssize_t K, float alpha, const float *A, Py_ssize_t lda, Py_ssize_t stride_a,
                           Py_ssize_t ostride_a, const float *B, Py_ssize_t ldb, Py_ssize_t stride_b,
                           Py_ssize_t ostride_b, float beta, float *C, Py_ssize_t ldc, Py_ssize_t stride_c,
                           Py_ssize_t ostride_c, const plast_gemm_epilogue *ep) noexcept nogil
cdef int gemm_batched2_f64(bint trans_a, bint trans_b, Py_ssize_t outer, Py_ssize_t batch, Py_ssize_t M, Py_ssize_t N,
                           Py_ssize_t K, double alpha, const double *A, Py_ssize_t lda, Py_ssize_t stride_a,
                           Py_ssize_t ostride_a, const double *B, Py_ssize_t ldb, Py_ssize_t stride_b,
                           Py_ssize_t ostride_b, double beta, double *C, Py_ssize_t ldc, Py_ssize_t stride_c,
                           Py_ssize_t ostride_c, const plast_gemm_epilogue *ep) noexcept nogil
# 16-bit operands (bfloat16 when bf16, else float16) and a 16-bit C, float32 accumulation (csrc/gemm16.h): the
# path (AMX, AVX512-BF16, widening) follows the run-time SIMD level.
cdef int gemm16_out16(bint bf16, bint trans_a, bint trans_b, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, float alpha,
                      const unsigned short *A, Py_ssize_t lda, const unsigned short *B, Py_ssize_t ldb, float beta,
                      unsigned short *C, Py_ssize_t ldc, const plast_gemm_epilogue *ep) noexcept nogil
