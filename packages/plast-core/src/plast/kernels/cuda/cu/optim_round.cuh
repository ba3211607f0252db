// The rounding helpers of the optimizer element updates (optim_rmsprop.cuh, optim_adaptive.cuh): each operation
// rounded to its type once. On the device the *_rn intrinsics keep nvcc from contracting a multiply and an add
// into an FMA that torch's CPU kernels do not have; the host build (tests/test_cuda_compile.py) uses
// -ffp-contract=off for the same reason. opt_fma is the one fused operation, used where torch's kernels fuse.
#pragma once

#include <math.h>

#ifdef __CUDACC__
#define PLAST_OPT_HD __host__ __device__ __forceinline__
#else
#define PLAST_OPT_HD static inline
#endif

PLAST_OPT_HD float opt_add(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
PLAST_OPT_HD double opt_add(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}
PLAST_OPT_HD float opt_sub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
PLAST_OPT_HD double opt_sub(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}
PLAST_OPT_HD float opt_mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
PLAST_OPT_HD double opt_mul(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
PLAST_OPT_HD float opt_div(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
PLAST_OPT_HD double opt_div(double a, double b) {
#ifdef __CUDA_ARCH__
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}
PLAST_OPT_HD float opt_sqrt(float a) {
#ifdef __CUDA_ARCH__
    return __fsqrt_rn(a);
#else
    return sqrtf(a);
#endif
}
PLAST_OPT_HD double opt_sqrt(double a) {
#ifdef __CUDA_ARCH__
    return __dsqrt_rn(a);
#else
    return sqrt(a);
#endif
}
PLAST_OPT_HD float opt_fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}
PLAST_OPT_HD double opt_fma(double a, double b, double c) {
#ifdef __CUDA_ARCH__
    return __fma_rn(a, b, c);
#else
    return fma(a, b, c);
#endif
}
