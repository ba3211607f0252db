/* One SIMD level's vocabulary for the level-generic kernel bodies (*_simd.h). Included by vec_levels.h once
 * per level with VLEVEL set to 2 (AVX-512), 1 (AVX2) or 0 (scalar); vec_end.h takes it all back.
 *
 * vf/vi/vm are the float, int32 and mask vectors; VN(name) names a function for this level; VTARGET is its
 * target attribute. vmin(a, b)/vmax(a, b) follow x86 minps/maxps: when either is NaN they return b, so
 * `vmin(const, x)` keeps a NaN x. No include guard: this file is meant to be included repeatedly.
 */
#if VLEVEL == 2
#define VW                      16
#define VN(name)                name##_avx512
#define VTARGET                 PLAST_TARGET_AVX512
#define vf                      __m512
#define vi                      __m512i
#define vm                      __mmask16
#define vset1(x)                _mm512_set1_ps(x)
#define vseti(x)                _mm512_set1_epi32(x)
#define vload(p)                _mm512_loadu_ps(p)
#define vstore(p, v)            _mm512_storeu_ps(p, v)
#define vtail(n)                ((__mmask16)((1u << (n)) - 1))
#define vloadn(p, n)            _mm512_maskz_loadu_ps(vtail(n), p)
#define vloadn_fill(p, n, fill) _mm512_mask_loadu_ps(_mm512_set1_ps(fill), vtail(n), p)
#define vstoren(p, v, n)        _mm512_mask_storeu_ps(p, vtail(n), v)
#define vgather(p, s)                                                                                                  \
    _mm512_i32gather_ps(_mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),     \
                                           _mm512_set1_epi32((int)(s))),                                               \
                        p, 4)
#define vadd                _mm512_add_ps
#define vsub                _mm512_sub_ps
#define vmul                _mm512_mul_ps
#define vdiv                _mm512_div_ps
#define vfma(a, b, c)       _mm512_fmadd_ps(a, b, c)
#define vfnma(a, b, c)      _mm512_fnmadd_ps(a, b, c)
#define vfms_exact(a, b, c) _mm512_fmsub_ps(a, b, c)
#define vmin                _mm512_min_ps
#define vmax                _mm512_max_ps
#define vsqrt               _mm512_sqrt_ps
#define vabs(x)             _mm512_abs_ps(x)
#define vneg(x)             _mm512_xor_ps(x, _mm512_set1_ps(-0.0f))
#define vcopysign(mag, sgn) _mm512_or_ps(_mm512_abs_ps(mag), _mm512_and_ps(sgn, _mm512_set1_ps(-0.0f)))
#define vlt(a, b)           _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define vle(a, b)           _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ)
#define vgt(a, b)           _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ)
#define vge(a, b)           _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ)
#define veq(a, b)           _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ)
#define visnan(a)           _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q)
#define vsel(m, a, b)       _mm512_mask_blend_ps(m, b, a)
#define vmor(a, b)          ((__mmask16)((a) | (b)))
#define vmand(a, b)         ((__mmask16)((a) & (b)))
#define vmany(m)            ((m) != 0)
#define vround(x)           _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vfloor(x)           _mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define vceil(x)            _mm512_roundscale_ps(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)
#define vtrunc(x)           _mm512_roundscale_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)
#define vcvti(x)            _mm512_cvtps_epi32(x)
#define vcvtf(x)            _mm512_cvtepi32_ps(x)
#define viadd               _mm512_add_epi32
#define visub               _mm512_sub_epi32
#define visrai(x, k)        _mm512_srai_epi32(x, k)
#define visrli(x, k)        _mm512_srli_epi32(x, k)
#define vislli(x, k)        _mm512_slli_epi32(x, k)
#define viand               _mm512_and_si512
#define vior                _mm512_or_si512
#define vasi(x)             _mm512_castps_si512(x)
#define vasf(x)             _mm512_castsi512_ps(x)
#define vhsum(x)            _mm512_reduce_add_ps(x)
#define vhmax(x)            _mm512_reduce_max_ps(x)
#define vhmin(x)            _mm512_reduce_min_ps(x)

#elif VLEVEL == 1
#define VW           8
#define VN(name)     name##_avx2
#define VTARGET      PLAST_TARGET_AVX2
#define vf           __m256
#define vi           __m256i
#define vm           __m256
#define vset1(x)     _mm256_set1_ps(x)
#define vseti(x)     _mm256_set1_epi32(x)
#define vload(p)     _mm256_loadu_ps(p)
#define vstore(p, v) _mm256_storeu_ps(p, v)
#define vtail(n)     _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define vloadn(p, n) _mm256_maskload_ps(p, vtail(n))
#define vloadn_fill(p, n, fill)                                                                                        \
    _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, vtail(n)), _mm256_castsi256_ps(vtail(n)))
#define vstoren(p, v, n) _mm256_maskstore_ps(p, vtail(n), v)
#define vgather(p, s)                                                                                                  \
    _mm256_i32gather_ps(p, _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)(s))), \
                        4)
#define vadd                _mm256_add_ps
#define vsub                _mm256_sub_ps
#define vmul                _mm256_mul_ps
#define vdiv                _mm256_div_ps
#define vfma(a, b, c)       _mm256_fmadd_ps(a, b, c)
#define vfnma(a, b, c)      _mm256_fnmadd_ps(a, b, c)
#define vfms_exact(a, b, c) _mm256_fmsub_ps(a, b, c)
#define vmin                _mm256_min_ps
#define vmax                _mm256_max_ps
#define vsqrt               _mm256_sqrt_ps
#define vabs(x)             _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x)
#define vneg(x)             _mm256_xor_ps(x, _mm256_set1_ps(-0.0f))
#define vcopysign(mag, sgn) _mm256_or_ps(vabs(mag), _mm256_and_ps(sgn, _mm256_set1_ps(-0.0f)))
#define vlt(a, b)           _mm256_cmp_ps(a, b, _CMP_LT_OQ)
#define vle(a, b)           _mm256_cmp_ps(a, b, _CMP_LE_OQ)
#define vgt(a, b)           _mm256_cmp_ps(a, b, _CMP_GT_OQ)
#define vge(a, b)           _mm256_cmp_ps(a, b, _CMP_GE_OQ)
#define veq(a, b)           _mm256_cmp_ps(a, b, _CMP_EQ_OQ)
#define visnan(a)           _mm256_cmp_ps(a, a, _CMP_UNORD_Q)
#define vsel(m, a, b)       _mm256_blendv_ps(b, a, m)
#define vmor(a, b)          _mm256_or_ps(a, b)
#define vmand(a, b)         _mm256_and_ps(a, b)
#define vmany(m)            (_mm256_movemask_ps(m) != 0)
#define vround(x)           _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vfloor(x)           _mm256_round_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define vceil(x)            _mm256_round_ps(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)
#define vtrunc(x)           _mm256_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)
#define vcvti(x)            _mm256_cvtps_epi32(x)
#define vcvtf(x)            _mm256_cvtepi32_ps(x)
#define viadd               _mm256_add_epi32
#define visub               _mm256_sub_epi32
#define visrai(x, k)        _mm256_srai_epi32(x, k)
#define visrli(x, k)        _mm256_srli_epi32(x, k)
#define vislli(x, k)        _mm256_slli_epi32(x, k)
#define viand               _mm256_and_si256
#define vior                _mm256_or_si256
#define vasi(x)             _mm256_castps_si256(x)
#define vasf(x)             _mm256_castsi256_ps(x)
#define vhsum(x)            plast_hsum_avx2(x)
#define vhmax(x)            plast_hmax_avx2(x)
#define vhmin(x)            plast_hmin_avx2(x)

#else /* scalar: one lane, plain C */
#define VW       1
#define VN(name) name##_scalar
#define VTARGET
#define vf                      float
#define vi                      int32_t
#define vm                      int
#define vset1(x)                ((float)(x))
#define vseti(x)                ((int32_t)(x))
#define vload(p)                (*(p))
#define vstore(p, v)            (*(p) = (v))
#define vloadn(p, n)            (*(p))
#define vloadn_fill(p, n, fill) (*(p))
#define vstoren(p, v, n)        (*(p) = (v))
#define vgather(p, s)           (*(p))
#define vadd(a, b)              ((a) + (b))
#define vsub(a, b)              ((a) - (b))
#define vmul(a, b)              ((a) * (b))
#define vdiv(a, b)              ((a) / (b))
#define vfma(a, b, c)           ((a) * (b) + (c))
#define vfnma(a, b, c)          ((c) - (a) * (b))
#define vfms_exact(a, b, c)     fmaf(a, b, -(c))
#define vmin(a, b)              ((a) < (b) ? (a) : (b))
#define vmax(a, b)              ((a) > (b) ? (a) : (b))
#define vsqrt                   sqrtf
#define vabs                    fabsf
#define vneg(x)                 (-(x))
#define vcopysign(mag, sgn)     copysignf(mag, sgn)
#define vlt(a, b)               ((a) < (b))
#define vle(a, b)               ((a) <= (b))
#define vgt(a, b)               ((a) > (b))
#define vge(a, b)               ((a) >= (b))
#define veq(a, b)               ((a) == (b))
#define visnan(a)               ((a) != (a))
#define vsel(m, a, b)           ((m) ? (a) : (b))
#define vmor(a, b)              ((a) || (b))
#define vmand(a, b)             ((a) && (b))
#define vmany(m)                (m)
#define vround(x)               rintf(x)
#define vfloor(x)               floorf(x)
#define vceil(x)                ceilf(x)
#define vtrunc(x)               truncf(x)
#define vcvti(x)                ((x) == (x) ? (int32_t)(x) : 0)
#define vcvtf(x)                ((float)(x))
#define viadd(a, b)             ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define visub(a, b)             ((int32_t)((uint32_t)(a) - (uint32_t)(b)))
#define visrai(x, k)            ((x) >> (k))
#define visrli(x, k)            ((int32_t)((uint32_t)(x) >> (k)))
#define vislli(x, k)            ((int32_t)((uint32_t)(x) << (k)))
#define viand(a, b)             ((a) & (b))
#define vior(a, b)              ((a) | (b))
#define vasi(x)                 plast_f2i(x)
#define vasf(x)                 plast_i2f(x)
#define vhsum(x)                (x)
#define vhmax(x)                (x)
#define vhmin(x)                (x)
#endif
