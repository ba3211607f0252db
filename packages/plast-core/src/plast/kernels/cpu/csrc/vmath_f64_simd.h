/* Vector math over doubles for one SIMD level (see vec_levels_f64.h): exp (vectorized, within about 1 ulp),
 * sigmoid and SiLU built on it, and log lane by lane through libm (only used once per row or column block,
 * never in an inner loop). Included once per level; no include guard on purpose.
 */

/* 2^k for integer-valued k in [-1022, 1023], built from the exponent bits. */
VTARGET static inline vf VN(v_pow2i)(vf k) {
#if VLEVEL == 2
    __m512i e = _mm512_add_epi64(_mm512_cvtpd_epi64(k), _mm512_set1_epi64(1023));
    return _mm512_castsi512_pd(_mm512_slli_epi64(e, 52));
#elif VLEVEL == 1
    /* k + 1.5 * 2^52 holds k in its low mantissa bits (two's complement), exactly, for |k| < 2^51 */
    __m256d magic = _mm256_set1_pd(6755399441055744.0);
    __m256i i = _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(k, magic)), _mm256_castpd_si256(magic));
    return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(i, _mm256_set1_epi64x(1023)), 52));
#else
    int64_t i = k == k ? (int64_t)k : 0; /* NaN: any value (the NaN propagates through the product) */
    uint64_t bits = (uint64_t)(i + 1023) << 52;
    double r;
    memcpy(&r, &bits, 8);
    return r;
#endif
}

/* exp(x): x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, the first with trailing zero bits so n * hi is
 * exact), e^r by its Taylor series to degree 13 (truncation below 5e-18 relative) in Horner form with FMAs
 * (within 1 ulp; the loop is throughput-bound, so Estrin's shorter chains bought nothing and cost three
 * multiplies), then times 2^n. Where some lane's 2^n is not a normal double (results near DBL_MAX or in the
 * subnormal range) 2^n is applied in two halves, so those come out right too. */
VTARGET static inline vf VN(v_exp)(vf x) {
    x = vmin(vset1(709.79), x); /* above ln(DBL_MAX): +inf; vmin keeps a NaN x */
    x = vmax(vset1(-745.2), x); /* below: 0 */
    vf n = vround(vmul(x, vset1(1.4426950408889634)));
    vf r = vfnma(n, vset1(6.93147180369123816490e-01), x);
    r = vfnma(n, vset1(1.90821492927058770002e-10), r);
    vf p = vset1(1.0 / 6227020800.0);
    p = vfma(p, r, vset1(1.0 / 479001600.0));
    p = vfma(p, r, vset1(1.0 / 39916800.0));
    p = vfma(p, r, vset1(1.0 / 3628800.0));
    p = vfma(p, r, vset1(1.0 / 362880.0));
    p = vfma(p, r, vset1(1.0 / 40320.0));
    p = vfma(p, r, vset1(1.0 / 5040.0));
    p = vfma(p, r, vset1(1.0 / 720.0));
    p = vfma(p, r, vset1(1.0 / 120.0));
    p = vfma(p, r, vset1(1.0 / 24.0));
    p = vfma(p, r, vset1(1.0 / 6.0));
    p = vfma(p, r, vset1(0.5));
    p = vfma(p, r, vset1(1.0));
    p = vfma(p, r, vset1(1.0));
    if (!vmany(vmor(vgt(n, vset1(1023.0)), vlt(n, vset1(-1022.0))))) return vmul(p, VN(v_pow2i)(n));
    vf n1 = vround(vmul(n, vset1(0.5)));
    vf n2 = vsub(n, n1);
    return vmul(vmul(p, VN(v_pow2i)(n1)), VN(v_pow2i)(n2));
}

/* log(x) lane by lane (libm): for per-row / per-column-block results only */
VTARGET static inline vf VN(v_log)(vf x) {
    double t[VW];
    vstore(t, x);
    for (int i = 0; i < VW; i++) t[i] = log(t[i]);
    return vload(t);
}

/* 1 / (1 + e^-x) through e = exp(-|x|), so neither side overflows and tiny results keep their accuracy */
VTARGET static inline vf VN(v_sigmoid)(vf x) {
    vf e = VN(v_exp)(vneg(vabs(x)));
    vf r = vdiv(vset1(1.0), vadd(vset1(1.0), e));
    return vsel(vlt(x, vset1(0.0)), vmul(e, r), r);
}
