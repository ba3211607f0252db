/* GEMM kernels for AVX2 + FMA: 6 x 16 float / 6 x 8 double micro-tiles, 12 ymm accumulators. */
#include "gemm_internal.h"

#if PLAST_X86

#define G_TRANSPOSE  2 /* AVX 8x8 (float) / 4x4 (double) block transposes */
#define GMR6_LIST(X) X(1) X(2) X(3) X(4) X(5) X(6)

PLAST_TARGET_AVX2 static inline __m256i gemm_mask8_avx2(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
PLAST_TARGET_AVX2 static inline __m256i gemm_mask4_avx2(int n) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
}
/* y * 2^n for integral n in [-126, 127]: build the power of two in the exponent field. */
PLAST_TARGET_AVX2 static inline __m256 gemm_ldexp_avx2(__m256 y, __m256 n) {
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* ---- float ---- */
#define GT                float
#define GS                f32
#define G_IS_F32          1
#define GSFX              f32_avx2
#define GTARGET           PLAST_TARGET_AVX2
#define GV                __m256
#define GVL               8
#define GMR               6
#define GMR_LIST          GMR6_LIST
#define GKC               384
#define GNB               480
#define GMB               1536
#define GUNROLL           1
#define GMASK             __m256i
#define G_MASK(n)         gemm_mask8_avx2(n)
#define G_ZERO()          _mm256_setzero_ps()
#define G_SET1(x)         _mm256_set1_ps(x)
#define G_LOAD(p)         _mm256_loadu_ps(p)
#define G_STORE(p, v)     _mm256_storeu_ps((p), (v))
#define G_LOADM(p, m)     _mm256_maskload_ps((p), (m))
#define G_STOREM(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define G_ADD             _mm256_add_ps
#define G_SUB             _mm256_sub_ps
#define G_MUL             _mm256_mul_ps
#define G_DIV             _mm256_div_ps
#define G_MIN             _mm256_min_ps
#define G_MAX             _mm256_max_ps
#define G_FMA             _mm256_fmadd_ps
#define G_RELU(x)         _mm256_max_ps(_mm256_setzero_ps(), (x))
#define G_ABS(x)          _mm256_and_ps((x), _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)))
#define G_ROUND(x)        _mm256_round_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define G_LDEXP           gemm_ldexp_avx2
#define G_SELNEG(x, a, b) _mm256_blendv_ps((b), (a), (x))
#define GVEC_ACT          1
#include "gemm_kernels.h"

/* ---- double ---- */
#define GT                double
#define GS                f64
#define G_IS_F32          0
#define GSFX              f64_avx2
#define GTARGET           PLAST_TARGET_AVX2
#define GV                __m256d
#define GVL               4
#define GMR               6
#define GMR_LIST          GMR6_LIST
#define GKC               256
#define GNB               240
#define GMB               1536
#define GUNROLL           1
#define GMASK             __m256i
#define G_MASK(n)         gemm_mask4_avx2(n)
#define G_ZERO()          _mm256_setzero_pd()
#define G_SET1(x)         _mm256_set1_pd(x)
#define G_LOAD(p)         _mm256_loadu_pd(p)
#define G_STORE(p, v)     _mm256_storeu_pd((p), (v))
#define G_LOADM(p, m)     _mm256_maskload_pd((p), (m))
#define G_STOREM(p, m, v) _mm256_maskstore_pd((p), (m), (v))
#define G_ADD             _mm256_add_pd
#define G_MUL             _mm256_mul_pd
#define G_FMA             _mm256_fmadd_pd
#define GVEC_ACT          0
#include "gemm_kernels.h"

#endif /* PLAST_X86 */
