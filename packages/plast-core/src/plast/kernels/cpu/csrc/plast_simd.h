/* SIMD levels and target attributes shared by every CPU kernel.
 *
 * One build runs on any x86-64: kernels that use AVX2 or AVX-512 are compiled with per-function target
 * attributes and chosen at run time (plast_cpu_simd_max() below, overridable with PLAST_SIMD). Each kernel entry
 * point takes the level as its first argument, so tests can force every path from one process.
 */
#ifndef PLAST_SIMD_H
#define PLAST_SIMD_H

#include <stddef.h>
#include <stdint.h>

#define PLAST_SIMD_SCALAR 0
#define PLAST_SIMD_AVX2   1
#define PLAST_SIMD_AVX512 2

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#define PLAST_X86 1
#include <immintrin.h>
#define PLAST_TARGET_AVX2   __attribute__((target("avx2,fma")))
#define PLAST_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")))
#else
#define PLAST_X86 0
#define PLAST_TARGET_AVX2
#define PLAST_TARGET_AVX512
#endif

#define PLAST_INLINE static inline __attribute__((always_inline))

/* Highest level this CPU (and its OS, for the wider registers) supports. */
static inline int plast_cpu_simd_max(void) {
#if PLAST_X86 && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return PLAST_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return PLAST_SIMD_AVX2;
#endif
    return PLAST_SIMD_SCALAR;
}

#endif /* PLAST_SIMD_H */
