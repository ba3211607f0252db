/* Level-generic part of attention.c: included once per SIMD level by vec_levels.h (float vocabulary of
 * vec_begin.h in scope). It names a matching double vocabulary for the level and instantiates the
 * element-type-generic body (attention_body.h) twice: float32 (AN(x) = x_f32_<level>) and float64
 * (x_f64_<level>).
 *
 * Body vocabulary: T the element, TV a vector of TW of them, t_* the vector operations, AT_NVMAX the widest
 * register tile (vectors per row of the 4-row micro-kernel: 4 where there are 32 registers, else 2),
 * AT_VEXP a vector exp when the level has one, AT_SEXP / AT_SLOG the scalar exp and log.
 */

#if VLEVEL == 2
#define AT_NVMAX 4
#else
#define AT_NVMAX 2
#endif

#if VLEVEL == 1 && !defined(PLAST_ATTN_HSUM_PD)
#define PLAST_ATTN_HSUM_PD
PLAST_TARGET_AVX2 static inline double plast_attn_hsum_pd_avx2(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
PLAST_TARGET_AVX2 static inline double plast_attn_hmax_pd_avx2(__m256d v) {
    __m128d s = _mm_max_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_max_sd(s, _mm_unpackhi_pd(s, s)));
}
#endif

/* ---- float32 ---- */
#define T              float
#define TV             vf
#define TW             VW
#define AN(name)       VN(name##_f32)
#define t_zero()       vset1(0.0f)
#define t_set1(x)      vset1(x)
#define t_load(p)      vload(p)
#define t_store(p, x)  vstore(p, x)
#define t_add(a, b)    vadd(a, b)
#define t_sub(a, b)    vsub(a, b)
#define t_mul(a, b)    vmul(a, b)
#define t_fma(a, b, c) vfma(a, b, c)
#define t_max(a, b)    vmax(a, b)
#define t_hsum(x)      vhsum(x)
#define t_hmax(x)      vhmax(x)
#define AT_VEXP(x)     VN(v_exp)(x)
#define AT_SEXP        expf
#define AT_SLOG        logf
#define AT_F32         1
#include "attention_body.h"
#undef AT_F32
#undef T
#undef TV
#undef TW
#undef AN
#undef t_zero
#undef t_set1
#undef t_load
#undef t_store
#undef t_add
#undef t_sub
#undef t_mul
#undef t_fma
#undef t_max
#undef t_hsum
#undef t_hmax
#undef AT_VEXP
#undef AT_SEXP
#undef AT_SLOG

/* ---- float64 (gradient checks: the products are vectorized, exp is the C library's) ---- */
#define T        double
#define AN(name) VN(name##_f64)
#define AT_SEXP  exp
#define AT_SLOG  log
#if VLEVEL == 2
#define TV             __m512d
#define TW             8
#define t_zero()       _mm512_setzero_pd()
#define t_set1(x)      _mm512_set1_pd(x)
#define t_load(p)      _mm512_loadu_pd(p)
#define t_store(p, x)  _mm512_storeu_pd(p, x)
#define t_add(a, b)    _mm512_add_pd(a, b)
#define t_sub(a, b)    _mm512_sub_pd(a, b)
#define t_mul(a, b)    _mm512_mul_pd(a, b)
#define t_fma(a, b, c) _mm512_fmadd_pd(a, b, c)
#define t_max(a, b)    _mm512_max_pd(a, b)
#define t_hsum(x)      _mm512_reduce_add_pd(x)
#define t_hmax(x)      _mm512_reduce_max_pd(x)
#elif VLEVEL == 1
#define TV             __m256d
#define TW             4
#define t_zero()       _mm256_setzero_pd()
#define t_set1(x)      _mm256_set1_pd(x)
#define t_load(p)      _mm256_loadu_pd(p)
#define t_store(p, x)  _mm256_storeu_pd(p, x)
#define t_add(a, b)    _mm256_add_pd(a, b)
#define t_sub(a, b)    _mm256_sub_pd(a, b)
#define t_mul(a, b)    _mm256_mul_pd(a, b)
#define t_fma(a, b, c) _mm256_fmadd_pd(a, b, c)
#define t_max(a, b)    _mm256_max_pd(a, b)
#define t_hsum(x)      plast_attn_hsum_pd_avx2(x)
#define t_hmax(x)      plast_attn_hmax_pd_avx2(x)
#else
#define TV             double
#define TW             1
#define t_zero()       0.0
#define t_set1(x)      ((double)(x))
#define t_load(p)      (*(p))
#define t_store(p, x)  (*(p) = (x))
#define t_add(a, b)    ((a) + (b))
#define t_sub(a, b)    ((a) - (b))
#define t_mul(a, b)    ((a) * (b))
#define t_fma(a, b, c) ((a) * (b) + (c))
#define t_max(a, b)    ((a) > (b) ? (a) : (b))
#define t_hsum(x)      (x)
#define t_hmax(x)      (x)
#endif
#include "attention_body.h"
#undef T
#undef TV
#undef TW
#undef AN
#undef t_zero
#undef t_set1
#undef t_load
#undef t_store
#undef t_add
#undef t_sub
#undef t_mul
#undef t_fma
#undef t_max
#undef t_hsum
#undef t_hmax
#undef AT_SEXP
#undef AT_SLOG

#undef AT_NVMAX
