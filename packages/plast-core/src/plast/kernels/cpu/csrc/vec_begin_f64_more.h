/* The rest of the float64 vocabulary: masked loads with a fill value, comparisons and masks, rounding, sign
 * handling and horizontal reductions, for the reduction / softmax / norm / loss bodies. Included right after
 * vec_begin_f64.h (same VLEVEL) by vec_levels_f64.h; vec_end.h takes it back with the rest. Every name is
 * guarded, so vec_begin_f64.h may grow the same names later without a clash. No include guard: included once
 * per level.
 *
 * Masks: __mmask8 (AVX-512), an all-ones/all-zeros __m256d per lane (AVX2), an int (scalar).
 * vhsum/vhmax/vhmin reduce across lanes (vhmax/vhmin assume no NaN lane: callers track NaN separately).
 */
#if VLEVEL == 2
#ifndef vloadn_fill
#define vloadn_fill(p, n, fill) _mm512_mask_loadu_pd(_mm512_set1_pd(fill), vtail(n), p)
#endif
#ifndef vfnma
#define vfnma(a, b, c) _mm512_fnmadd_pd(a, b, c)
#endif
#ifndef vfms_exact
#define vfms_exact(a, b, c) _mm512_fmsub_pd(a, b, c)
#endif
#ifndef vabs
#define vabs(x) _mm512_abs_pd(x)
#endif
#ifndef vcopysign
#define vcopysign(mag, sgn)                                                                                            \
    _mm512_castsi512_pd(_mm512_or_si512(                                                                               \
        _mm512_castpd_si512(_mm512_abs_pd(mag)),                                                                       \
        _mm512_and_si512(_mm512_castpd_si512(sgn), _mm512_set1_epi64((long long)0x8000000000000000ull))))
#endif
#ifndef vlt
#define vlt(a, b) _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ)
#define vle(a, b) _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ)
#define vgt(a, b) _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ)
#define vge(a, b) _mm512_cmp_pd_mask(a, b, _CMP_GE_OQ)
#define veq(a, b) _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ)
#endif
#ifndef vmor
#define vmor(a, b)  ((__mmask8)((a) | (b)))
#define vmand(a, b) ((__mmask8)((a) & (b)))
#define vmany(m)    ((m) != 0)
#endif
#ifndef vround
#define vround(x) _mm512_roundscale_pd(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vfloor(x) _mm512_roundscale_pd(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define vceil(x)  _mm512_roundscale_pd(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)
#define vtrunc(x) _mm512_roundscale_pd(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)
#endif
#ifndef vhsum
#define vhsum(x) _mm512_reduce_add_pd(x)
#define vhmax(x) _mm512_reduce_max_pd(x)
#define vhmin(x) _mm512_reduce_min_pd(x)
#endif

#elif VLEVEL == 1
#ifndef vloadn_fill
#define vloadn_fill(p, n, fill)                                                                                        \
    _mm256_blendv_pd(_mm256_set1_pd(fill), _mm256_maskload_pd(p, vtail(n)), _mm256_castsi256_pd(vtail(n)))
#endif
#ifndef vfnma
#define vfnma(a, b, c) _mm256_fnmadd_pd(a, b, c)
#endif
#ifndef vfms_exact
#define vfms_exact(a, b, c) _mm256_fmsub_pd(a, b, c)
#endif
#ifndef vabs
#define vabs(x) _mm256_andnot_pd(_mm256_set1_pd(-0.0), x)
#endif
#ifndef vcopysign
#define vcopysign(mag, sgn) _mm256_or_pd(vabs(mag), _mm256_and_pd(sgn, _mm256_set1_pd(-0.0)))
#endif
#ifndef vlt
#define vlt(a, b) _mm256_cmp_pd(a, b, _CMP_LT_OQ)
#define vle(a, b) _mm256_cmp_pd(a, b, _CMP_LE_OQ)
#define vgt(a, b) _mm256_cmp_pd(a, b, _CMP_GT_OQ)
#define vge(a, b) _mm256_cmp_pd(a, b, _CMP_GE_OQ)
#define veq(a, b) _mm256_cmp_pd(a, b, _CMP_EQ_OQ)
#endif
#ifndef vmor
#define vmor(a, b)  _mm256_or_pd(a, b)
#define vmand(a, b) _mm256_and_pd(a, b)
#define vmany(m)    (_mm256_movemask_pd(m) != 0)
#endif
#ifndef vround
#define vround(x) _mm256_round_pd(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vfloor(x) _mm256_round_pd(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define vceil(x)  _mm256_round_pd(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)
#define vtrunc(x) _mm256_round_pd(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)
#endif
#ifndef vhsum
#define vhsum(x) plast_hsum_pd_avx2(x)
#define vhmax(x) plast_hmax_pd_avx2(x)
#define vhmin(x) plast_hmin_pd_avx2(x)
#endif

#else /* scalar */
#ifndef vloadn_fill
#define vloadn_fill(p, n, fill) (*(p))
#endif
#ifndef vfnma
#define vfnma(a, b, c) ((c) - (a) * (b))
#endif
#ifndef vfms_exact
#define vfms_exact(a, b, c) fma(a, b, -(c))
#endif
#ifndef vabs
#define vabs fabs
#endif
#ifndef vcopysign
#define vcopysign(mag, sgn) copysign(mag, sgn)
#endif
#ifndef vlt
#define vlt(a, b) ((a) < (b))
#define vle(a, b) ((a) <= (b))
#define vgt(a, b) ((a) > (b))
#define vge(a, b) ((a) >= (b))
#define veq(a, b) ((a) == (b))
#endif
#ifndef vmor
#define vmor(a, b)  ((a) || (b))
#define vmand(a, b) ((a) && (b))
#define vmany(m)    (m)
#endif
#ifndef vround
#define vround(x) rint(x)
#define vfloor(x) floor(x)
#define vceil(x)  ceil(x)
#define vtrunc(x) trunc(x)
#endif
#ifndef vhsum
#define vhsum(x) (x)
#define vhmax(x) (x)
#define vhmin(x) (x)
#endif
#endif
