/* Instantiates a level-generic kernel body once per SIMD level.
 *
 * A kernel file defines PLAST_VEC_BODY as the header holding its level-generic code (written with the
 * vocabulary of vec_begin.h and the vector math of vmath_simd.h) and includes this file; it gets
 * name_avx512, name_avx2 (x86 only) and name_scalar versions of every VN(name) function, and picks one at run
 * time from the `simd` argument. Included once per kernel file.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "plast_simd.h"

#ifndef PLAST_VEC_HELPERS
#define PLAST_VEC_HELPERS
static inline int32_t plast_f2i(float x) {
    int32_t i;
    memcpy(&i, &x, 4);
    return i;
}
static inline float plast_i2f(int32_t i) {
    float x;
    memcpy(&x, &i, 4);
    return x;
}
#if PLAST_X86
PLAST_TARGET_AVX2 static inline float plast_hsum_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
PLAST_TARGET_AVX2 static inline float plast_hmax_avx2(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
PLAST_TARGET_AVX2 static inline float plast_hmin_avx2(__m256 v) {
    __m128 s = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_min_ps(s, _mm_movehl_ps(s, s));
    s = _mm_min_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif
#endif

#if PLAST_X86
#define VLEVEL 2
#include "vec_begin.h"
#include "vmath_simd.h"
#include PLAST_VEC_BODY
#include "vec_end.h"

#define VLEVEL 1
#include "vec_begin.h"
#include "vmath_simd.h"
#include PLAST_VEC_BODY
#include "vec_end.h"
#endif

#define VLEVEL 0
#include "vec_begin.h"
#include "vmath_simd.h"
#include PLAST_VEC_BODY
#include "vec_end.h"

/* PLAST_VEC_DISPATCH(fn, args): call the version of fn for the level `simd` (a variable in scope). */
#if PLAST_X86
#define PLAST_VEC_DISPATCH(fn, ...)                                                                                    \
    do {                                                                                                               \
        if (simd >= PLAST_SIMD_AVX512) fn##_avx512(__VA_ARGS__);                                                       \
        else if (simd >= PLAST_SIMD_AVX2) fn##_avx2(__VA_ARGS__);                                                      \
        else fn##_scalar(__VA_ARGS__);                                                                                 \
    } while (0)
#else
#define PLAST_VEC_DISPATCH(fn, ...) fn##_scalar(__VA_ARGS__)
#endif

/* PLAST_VEC_CALL(fn, args): the same, as an expression with fn's value. */
#if PLAST_X86
#define PLAST_VEC_CALL(fn, ...)                                                                                        \
    (simd >= PLAST_SIMD_AVX512 ? fn##_avx512(__VA_ARGS__)                                                              \
     : simd >= PLAST_SIMD_AVX2 ? fn##_avx2(__VA_ARGS__)                                                                \
                               : fn##_scalar(__VA_ARGS__))
#else
#define PLAST_VEC_CALL(fn, ...) fn##_scalar(__VA_ARGS__)
#endif
