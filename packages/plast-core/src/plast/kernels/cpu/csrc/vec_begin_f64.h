/* The float64 counterpart of vec_begin.h: one SIMD level's vocabulary over doubles, for level-generic bodies
 * that are written once and instantiated for float32 (vec_begin.h) and float64 (this file). Included with
 * VLEVEL set to 2 (AVX-512), 1 (AVX2) or 0 (scalar); vec_end.h takes it all back. VN(name) gives name_f64_avx512
 * and so on, so the float64 versions sit next to the float32 ones in one file.
 *
 * Only the arithmetic subset is here (no integer lanes, gathers or reductions). vmax(a, b) follows x86 maxpd:
 * when either is NaN it returns b. No include guard: this file is meant to be included repeatedly.
 */
#if VLEVEL == 2
#define VW               8
#define VN(name)         name##_f64_avx512
#define VTARGET          PLAST_TARGET_AVX512
#define vf               __m512d
#define vm               __mmask8
#define vset1(x)         _mm512_set1_pd(x)
#define vload(p)         _mm512_loadu_pd(p)
#define vstore(p, v)     _mm512_storeu_pd(p, v)
#define vtail(n)         ((__mmask8)((1u << (n)) - 1))
#define vloadn(p, n)     _mm512_maskz_loadu_pd(vtail(n), p)
#define vstoren(p, v, n) _mm512_mask_storeu_pd(p, vtail(n), v)
#define vadd             _mm512_add_pd
#define vsub             _mm512_sub_pd
#define vmul             _mm512_mul_pd
#define vdiv             _mm512_div_pd
#define vfma(a, b, c)    _mm512_fmadd_pd(a, b, c)
#define vmin             _mm512_min_pd
#define vmax             _mm512_max_pd
#define vsqrt            _mm512_sqrt_pd
#define vneg(x)          _mm512_xor_pd(x, _mm512_set1_pd(-0.0))
#define visnan(a)        _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q)
#define vsel(m, a, b)    _mm512_mask_blend_pd(m, b, a)

#elif VLEVEL == 1
#define VW               4
#define VN(name)         name##_f64_avx2
#define VTARGET          PLAST_TARGET_AVX2
#define vf               __m256d
#define vm               __m256d
#define vset1(x)         _mm256_set1_pd(x)
#define vload(p)         _mm256_loadu_pd(p)
#define vstore(p, v)     _mm256_storeu_pd(p, v)
#define vtail(n)         _mm256_cmpgt_epi64(_mm256_set1_epi64x((long long)(n)), _mm256_setr_epi64x(0, 1, 2, 3))
#define vloadn(p, n)     _mm256_maskload_pd(p, vtail(n))
#define vstoren(p, v, n) _mm256_maskstore_pd(p, vtail(n), v)
#define vadd             _mm256_add_pd
#define vsub             _mm256_sub_pd
#define vmul             _mm256_mul_pd
#define vdiv             _mm256_div_pd
#define vfma(a, b, c)    _mm256_fmadd_pd(a, b, c)
#define vmin             _mm256_min_pd
#define vmax             _mm256_max_pd
#define vsqrt            _mm256_sqrt_pd
#define vneg(x)          _mm256_xor_pd(x, _mm256_set1_pd(-0.0))
#define visnan(a)        _mm256_cmp_pd(a, a, _CMP_UNORD_Q)
#define vsel(m, a, b)    _mm256_blendv_pd(b, a, m)

#else /* scalar: one lane, plain C */
#define VW       1
#define VN(name) name##_f64_scalar
#define VTARGET
#define vf               double
#define vm               int
#define vset1(x)         ((double)(x))
#define vload(p)         (*(p))
#define vstore(p, v)     (*(p) = (v))
#define vloadn(p, n)     (*(p))
#define vstoren(p, v, n) (*(p) = (v))
#define vadd(a, b)       ((a) + (b))
#define vsub(a, b)       ((a) - (b))
#define vmul(a, b)       ((a) * (b))
#define vdiv(a, b)       ((a) / (b))
#define vfma(a, b, c)    ((a) * (b) + (c))
#define vmin(a, b)       ((a) < (b) ? (a) : (b))
#define vmax(a, b)       ((a) > (b) ? (a) : (b))
#define vsqrt            sqrt
#define vneg(x)          (-(x))
#define visnan(a)        ((a) != (a))
#define vsel(m, a, b)    ((m) ? (a) : (b))
#endif
