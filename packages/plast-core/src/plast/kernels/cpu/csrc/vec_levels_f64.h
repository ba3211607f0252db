/* Instantiates a level-generic kernel body once per SIMD level over doubles: the float64 twin of
 * vec_levels.h.
 *
 * A kernel file includes vec_levels.h first (float32 levels, helpers, PLAST_VEC_DISPATCH / PLAST_VEC_CALL),
 * then sets VT to double and includes this file with PLAST_VEC_BODY naming the body (the same body as for
 * float32 when it is written over VT, or a float64-only one). The body sees vec_begin_f64.h +
 * vec_begin_f64_more.h and the float64 vector math of vmath_f64_simd.h; VN(name) gives name_f64_avx512 / _avx2 / _scalar, so
 * PLAST_VEC_DISPATCH(name_f64, ...) picks one. VT_F64 is 1 inside (0 for the float32 instantiation), for the
 * few places where a body differs by type.
 *
 * PLAST_VEC_DISPATCH_T / PLAST_VEC_CALL_T take a function name that is itself a macro (a driver written once
 * for both types names its bodies KN(name)): the extra level expands it before the name is pasted.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "plast_simd.h"

#ifndef PLAST_VEC_DISPATCH
#error "vec_levels_f64.h: include vec_levels.h (float32 levels and the dispatch macros) first"
#endif

#ifndef PLAST_VEC_F64_HELPERS
#define PLAST_VEC_F64_HELPERS
#if PLAST_X86
PLAST_TARGET_AVX2 static inline double plast_hsum_pd_avx2(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
PLAST_TARGET_AVX2 static inline double plast_hmax_pd_avx2(__m256d v) {
    __m128d s = _mm_max_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_max_sd(s, _mm_unpackhi_pd(s, s)));
}
PLAST_TARGET_AVX2 static inline double plast_hmin_pd_avx2(__m256d v) {
    __m128d s = _mm_min_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_min_sd(s, _mm_unpackhi_pd(s, s)));
}
#endif
#define PLAST_VEC_DISPATCH_T(fn, ...) PLAST_VEC_DISPATCH(fn, __VA_ARGS__)
#define PLAST_VEC_CALL_T(fn, ...)     PLAST_VEC_CALL(fn, __VA_ARGS__)
#endif

#undef VT_F64
#define VT_F64 1

#if PLAST_X86
#define VLEVEL 2
#include "vec_begin_f64.h"
#include "vec_begin_f64_more.h"
#include "vmath_f64_simd.h"
#include PLAST_VEC_BODY
#include "vec_end.h"

#define VLEVEL 1
#include "vec_begin_f64.h"
#include "vec_begin_f64_more.h"
#include "vmath_f64_simd.h"
#include PLAST_VEC_BODY
#include "vec_end.h"
#endif

#define VLEVEL 0
#include "vec_begin_f64.h"
#include "vec_begin_f64_more.h"
#include "vmath_f64_simd.h"
#include PLAST_VEC_BODY
#include "vec_end.h"

#undef VT_F64
#define VT_F64 0
