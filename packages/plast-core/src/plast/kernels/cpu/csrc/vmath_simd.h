/* Vector math for one SIMD level (see vec_levels.h): float32 exp, exp2, expm1, log, log2, log10, log1p, tanh,
 * sigmoid, erf, erfc, GELU (erf and tanh forms), SiLU, sin and cos, within a few ulp of the correctly rounded
 * result.
 *
 * Each function range-reduces, evaluates a polynomial with FMAs and handles inf/NaN/zero explicitly. The exp,
 * log, sin and cos polynomials are the classic Cephes single-precision ones; the erf and erfcx polynomials were fitted
 * for plast (least squares on Chebyshev nodes against 40-digit references). Included once per level; no
 * include guard on purpose.
 */

/* e^r * 2^n for |r| <= ln2/2 and integer-valued n: e^r by a degree-7 polynomial, 2^n applied in two halves so
 * results near FLT_MAX and in the subnormal range come out right. */
VTARGET static inline vf VN(v_exp_scaled)(vf r, vf n) {
    vf p = vset1(1.9875691500e-4f);
    p = vfma(p, r, vset1(1.3981999507e-3f));
    p = vfma(p, r, vset1(8.3334519073e-3f));
    p = vfma(p, r, vset1(4.1665795894e-2f));
    p = vfma(p, r, vset1(1.6666665459e-1f));
    p = vfma(p, r, vset1(5.0000001201e-1f));
    p = vfma(p, vmul(r, r), vadd(r, vset1(1.0f)));
    vi ni = vcvti(n);
    vi n1 = visrai(ni, 1);
    vi n2 = visub(ni, n1);
    vf s1 = vasf(vislli(viadd(n1, vseti(127)), 23));
    vf s2 = vasf(vislli(viadd(n2, vseti(127)), 23));
    return vmul(vmul(p, s1), s2);
}

/* exp(x): x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so n * hi is exact). */
VTARGET static inline vf VN(v_exp)(vf x) {
    x = vmin(vset1(88.72284f), x);  /* above: +inf (the halves overflow) */
    x = vmax(vset1(-103.9721f), x); /* below: 0 */
    vf n = vround(vmul(x, vset1(1.44269504088896341f)));
    vf r = vfnma(n, vset1(0.693359375f), x);
    r = vfnma(n, vset1(-2.12194440e-4f), r);
    return VN(v_exp_scaled)(r, n);
}

/* 2^x: x = n + f with |f| <= 1/2 (exact), 2^f = e^(f ln2). Whole x give exact powers of two. */
VTARGET static inline vf VN(v_exp2)(vf x) {
    x = vmin(vset1(128.0f), x);  /* above: +inf; vmin keeps a NaN x */
    x = vmax(vset1(-150.0f), x); /* below: 0 */
    vf n = vround(x);
    return VN(v_exp_scaled)(vmul(vsub(x, n), vset1(0.693147180559945309f)), n);
}

/* e^x - 1: near 0 its Taylor series to degree 8 (no cancellation), elsewhere exp(x) - 1, which loses at most
 * a bit or two where |x| > ln2/2. -0 stays -0. */
VTARGET static inline vf VN(v_expm1)(vf x) {
    vf q = vset1(1.0f / 40320.0f);
    q = vfma(q, x, vset1(1.0f / 5040.0f));
    q = vfma(q, x, vset1(1.0f / 720.0f));
    q = vfma(q, x, vset1(1.0f / 120.0f));
    q = vfma(q, x, vset1(1.0f / 24.0f));
    q = vfma(q, x, vset1(1.0f / 6.0f));
    q = vfma(q, x, vset1(0.5f));
    vf small = vfma(vmul(x, x), q, x);
    small = vsel(veq(x, vset1(0.0f)), x, small);
    vf large = vsub(VN(v_exp)(x), vset1(1.0f));
    return vsel(vlt(vabs(x), vset1(0.34657359f)), small, large);
}

/* log(x) in parts: x = m 2^e with m in [sqrt(1/2), sqrt(2)); returns f = m - 1 and sets *e and *y with
 * log(m) = f + y - f^2/2, y = f^3 P(f). The callers put the parts together and fix up x <= 0, inf and NaN
 * (v_log_special). */
VTARGET static inline vf VN(v_log_parts)(vf x, vf *e_out, vf *y_out) {
    vm sub = vlt(x, vset1(1.17549435e-38f)); /* subnormals (and <= 0, fixed by the caller): scale by 2^23 */
    vf xs = vsel(sub, vmul(x, vset1(8388608.0f)), x);
    vf eadj = vsel(sub, vset1(-23.0f), vset1(0.0f));
    vi bits = vasi(xs);
    vf e = vadd(vcvtf(visub(viand(visrli(bits, 23), vseti(0xff)), vseti(127))), eadj);
    vf m = vasf(vior(viand(bits, vseti(0x007fffff)), vseti(0x3f800000)));
    vm big = vgt(m, vset1(1.41421356f));
    m = vsel(big, vmul(m, vset1(0.5f)), m);
    *e_out = vsel(big, vadd(e, vset1(1.0f)), e);
    vf f = vsub(m, vset1(1.0f));
    vf p = vset1(7.0376836292e-2f);
    p = vfma(p, f, vset1(-1.1514610310e-1f));
    p = vfma(p, f, vset1(1.1676998740e-1f));
    p = vfma(p, f, vset1(-1.2420140846e-1f));
    p = vfma(p, f, vset1(1.4249322787e-1f));
    p = vfma(p, f, vset1(-1.6668057665e-1f));
    p = vfma(p, f, vset1(2.0000714765e-1f));
    p = vfma(p, f, vset1(-2.4999993993e-1f));
    p = vfma(p, f, vset1(3.3333331174e-1f));
    *y_out = vmul(vmul(p, f), vmul(f, f));
    return f;
}

/* a logarithm's value r of x, with the special cases: log(inf) = inf, log(0) = -inf, log(< 0 or NaN) = NaN */
VTARGET static inline vf VN(v_log_special)(vf x, vf r) {
    r = vsel(veq(x, vset1(INFINITY)), vset1(INFINITY), r);
    r = vsel(veq(x, vset1(0.0f)), vset1(-INFINITY), r);
    return vsel(vmor(vlt(x, vset1(0.0f)), visnan(x)), vset1(NAN), r);
}

/* log(x) = e ln2 + log(m), log(m) = f - f^2/2 + f^3 P(f) (ln2 in two parts). */
VTARGET static inline vf VN(v_log)(vf x) {
    vf e, y;
    vf f = VN(v_log_parts)(x, &e, &y);
    vf z = vmul(f, f);
    y = vfma(e, vset1(-2.12194440e-4f), y);
    y = vfma(z, vset1(-0.5f), y);
    vf r = vadd(f, y);
    r = vfma(e, vset1(0.693359375f), r);
    return VN(v_log_special)(x, r);
}

/* log2(x) = e + log(m) / ln2: |log(m) / ln2| <= 1/2, so the sum never cancels, and powers of two are exact. */
VTARGET static inline vf VN(v_log2)(vf x) {
    vf e, y;
    vf f = VN(v_log_parts)(x, &e, &y);
    vf lm = vadd(f, vfma(vmul(f, f), vset1(-0.5f), y));
    return VN(v_log_special)(x, vfma(lm, vset1(1.44269504088896341f), e));
}

/* log10(x) = e log10(2) + log(m) log10(e), log10(2) in two parts (e * hi is exact): the small terms are summed
 * first and the result rounded once, so powers of ten come out whole. */
VTARGET static inline vf VN(v_log10)(vf x) {
    vf e, y;
    vf f = VN(v_log_parts)(x, &e, &y);
    vf lm = vadd(f, vfma(vmul(f, f), vset1(-0.5f), y));
    vf lo = vfma(e, vset1(4.605039066518657e-06f), vmul(lm, vset1(0.434294481903251828f)));
    return VN(v_log_special)(x, vfma(e, vset1(0.301025390625f), lo));
}

/* log1p(x) = log(u) * x / (u - 1) with u = 1 + x: the rounding of u cancels to first order. */
VTARGET static inline vf VN(v_log1p)(vf x) {
    vf u = vadd(vset1(1.0f), x);
    vf d = vsub(u, vset1(1.0f));
    vf r = vmul(VN(v_log)(u), vdiv(x, d));
    r = vsel(veq(d, vset1(0.0f)), x, r);
    r = vsel(veq(u, vset1(INFINITY)), u, r);
    return vsel(veq(x, vset1(-1.0f)), vset1(-INFINITY), r);
}

VTARGET static inline vf VN(v_tanh)(vf x) {
    vf ax = vabs(x);
    vf z = vmul(x, x);
    vf p = vset1(-5.70498872745e-3f);
    p = vfma(p, z, vset1(2.06390887954e-2f));
    p = vfma(p, z, vset1(-5.37397155531e-2f));
    p = vfma(p, z, vset1(1.33314422036e-1f));
    p = vfma(p, z, vset1(-3.33332819422e-1f));
    vf small = vfma(vmul(p, z), x, x);
    vf e = VN(v_exp)(vadd(ax, ax));
    vf large = vsub(vset1(1.0f), vdiv(vset1(2.0f), vadd(e, vset1(1.0f))));
    large = vcopysign(large, x);
    return vsel(vlt(ax, vset1(0.625f)), small, large);
}

/* 1 / (1 + e^-x), through e = exp(-|x|) so that neither side overflows: e^x / (1 + e^x) for negative x keeps
 * full relative accuracy down to the subnormals. */
VTARGET static inline vf VN(v_sigmoid)(vf x) {
    vf e = VN(v_exp)(vneg(vabs(x)));
    vf r = vdiv(vset1(1.0f), vadd(vset1(1.0f), e));
    return vsel(vlt(x, vset1(0.0f)), vmul(e, r), r);
}

VTARGET static inline vf VN(v_silu)(vf x) { return vmul(x, VN(v_sigmoid)(x)); }

/* erfc(t) for 0.5 <= t <= 10.5 (larger t: 0): exp(-t^2) * erfcx(t), erfcx by a polynomial in
 * w = (t - 3) / (t + 3). The caller passes t^2 as hi + lo, so the exponential keeps full relative accuracy in
 * the far tail. */
VTARGET static inline vf VN(v_erfc_tail)(vf t, vf t2, vf t2lo) {
    vf w = vdiv(vsub(t, vset1(3.0f)), vadd(t, vset1(3.0f)));
    vf p = vset1(-5.426484277e-04f);
    p = vfma(p, w, vset1(7.372084074e-04f));
    p = vfma(p, w, vset1(4.250921309e-03f));
    p = vfma(p, w, vset1(-2.439941466e-02f));
    p = vfma(p, w, vset1(7.166856527e-02f));
    p = vfma(p, w, vset1(-1.501153409e-01f));
    p = vfma(p, w, vset1(2.456036508e-01f));
    p = vfma(p, w, vset1(-3.262335658e-01f));
    p = vfma(p, w, vset1(1.790011525e-01f));
    vf e = VN(v_exp)(vneg(t2));
    e = vfnma(e, t2lo, e);
    return vmul(e, p);
}

/* erf(x) / x for |x| < 1, a polynomial in x^2 */
VTARGET static inline vf VN(v_erf_small)(vf x) {
    vf z = vmul(x, x);
    vf p = vset1(7.898201875e-05f);
    p = vfma(p, z, vset1(-8.024351555e-04f));
    p = vfma(p, z, vset1(5.190053023e-03f));
    p = vfma(p, z, vset1(-2.685480751e-02f));
    p = vfma(p, z, vset1(1.128361225e-01f));
    p = vfma(p, z, vset1(-3.761262894e-01f));
    p = vfma(p, z, vset1(1.128379226e+00f));
    return p;
}

VTARGET static inline vf VN(v_erf)(vf x) {
    vf ax = vabs(x);
    vf small = vmul(x, VN(v_erf_small)(x));
    vf t = vmin(vset1(10.5f), vmax(vset1(1.0f), ax));
    vf t2 = vmul(t, t);
    vf large = vsub(vset1(1.0f), VN(v_erfc_tail)(t, t2, vfms_exact(t, t, t2)));
    large = vcopysign(large, x);
    large = vsel(visnan(x), x, large);
    return vsel(vlt(ax, vset1(1.0f)), small, large);
}

/* x * Phi(x) = x/2 * (1 + erf(x / sqrt2)). Outside -0.5 < t < 1 it goes through erfc, the negative side
 * without forming 1 + erf (no cancellation) and with t^2 = x^2 / 2 formed exactly from x, not from the rounded
 * t, so tiny results keep their relative accuracy. */
VTARGET static inline vf VN(v_gelu_erf)(vf x) {
    vf t = vmul(x, vset1(0.70710678118654752f));
    vf hx = vmul(x, vset1(0.5f));
    vf small = vfma(hx, vmul(t, VN(v_erf_small)(t)), hx);
    vf xc = vmax(vset1(-14.8f), vmin(vset1(14.8f), x));
    vf at = vmax(vset1(0.5f), vabs(vmul(xc, vset1(0.70710678118654752f))));
    vf x2 = vmul(xc, xc);
    vf x2lo = vfms_exact(xc, xc, x2);
    vf ec = VN(v_erfc_tail)(at, vmul(x2, vset1(0.5f)), vmul(x2lo, vset1(0.5f)));
    /* the positive side multiplies ec by the clamped x / 2: at x = +inf, ec is 0 and hx * ec would be nan */
    vf r = vsel(vlt(t, vset1(0.0f)), vmul(hx, ec), vfnma(vmul(xc, vset1(0.5f)), ec, x));
    r = vsel(visnan(x), x, r);
    return vsel(vmand(vgt(t, vset1(-0.5f)), vlt(t, vset1(1.0f))), small, r);
}

/* torch's tanh form: 0.5 x (1 + tanh(u)) = x * sigmoid(2u), which has no cancellation for negative x. */
VTARGET static inline vf VN(v_gelu_tanh)(vf x) {
    vf x3 = vmul(vmul(x, x), x);
    vf u = vmul(vfma(x3, vset1(0.044715f), x), vset1(0.79788456080286536f));
    return vmul(x, VN(v_sigmoid)(vadd(u, u)));
}

/* gelu_tanh's derivative, torch's formula (its gelu_backward, approximate="tanh"): with u = b (x + k x^3) and
 * t = tanh(u), 0.5 (1 + t) + 0.5 x (1 - t^2) b (1 + 3 k x^2), b = sqrt(2/pi), k = 0.044715. */
VTARGET static inline vf VN(v_gelu_tanh_grad)(vf x) {
    vf x2 = vmul(x, x);
    vf t = VN(v_tanh)(vmul(vfma(vmul(x2, x), vset1(0.044715f), x), vset1(0.79788456080286536f)));
    vf left_d = vmul(vset1(0.5f), vadd(vset1(1.0f), t));
    vf inner_d = vmul(vset1(0.79788456080286536f), vfma(x2, vset1(3.0f * 0.044715f), vset1(1.0f)));
    vf right_d = vmul(vfnma(t, t, vset1(1.0f)), inner_d);
    return vfma(vmul(vset1(0.5f), x), right_d, left_d);
}

/* gelu_erf's derivative, torch's formula: Phi(x) + x phi(x) = 0.5 (1 + erf(x / sqrt2)) + x exp(-x^2 / 2) /
 * sqrt(2 pi). */
VTARGET static inline vf VN(v_gelu_erf_grad)(vf x) {
    vf cdf = vmul(vset1(0.5f), vadd(vset1(1.0f), VN(v_erf)(vmul(x, vset1(0.70710678118654752f)))));
    vf pdf = vmul(VN(v_exp)(vmul(vmul(x, x), vset1(-0.5f))), vset1(0.39894228040143268f));
    return vfma(x, pdf, cdf);
}

/* sin(x) (cosine = 0) or cos(x) (cosine = 1) for |x| <= 8192: j = the even integer nearest |x| / (pi/4), which
 * picks the octant, and t = |x| - j pi/4 with pi/4 in three parts (each product exact through a fused
 * multiply-add), then the Cephes single-precision sine or cosine polynomial on |t| <= pi/4. Larger |x|, inf and
 * NaN lanes go through libm (its full-precision argument reduction). */
VTARGET static inline vf VN(v_sincos)(vf x, int cosine) {
    vf ax = vabs(x);
    vf j = vtrunc(vmul(ax, vset1(1.27323954473516f)));
    j = vadd(
        j, vsel(veq(vsub(j, vmul(vtrunc(vmul(j, vset1(0.5f))), vset1(2.0f))), vset1(1.0f)), vset1(1.0f), vset1(0.0f)));
    vf t = vneg(vfms_exact(j, vset1(0.78515625f), ax));
    t = vneg(vfms_exact(j, vset1(2.4187564849853515625e-4f), t));
    t = vneg(vfms_exact(j, vset1(3.77489497744594108e-8f), t));
    vf z = vmul(t, t);
    vf ps = vset1(-1.9515295891e-4f);
    ps = vfma(ps, z, vset1(8.3321608736e-3f));
    ps = vfma(ps, z, vset1(-1.6666654611e-1f));
    ps = vfma(vmul(ps, z), t, t);
    vf pc = vset1(2.443315711809948e-5f);
    pc = vfma(pc, z, vset1(-1.388731625493765e-3f));
    pc = vfma(pc, z, vset1(4.166664568298827e-2f));
    pc = vfma(vmul(pc, z), z, vfma(z, vset1(-0.5f), vset1(1.0f)));
    /* the octant j mod 8 (0, 2, 4 or 6): cos(t) in octants 2 and 6; sin(|x|) is negative in 4 and 6, cos(|x|)
     * in 2 and 4 */
    vf q = vsub(j, vmul(vtrunc(vmul(j, vset1(0.125f))), vset1(8.0f)));
    vm use_cos = vmor(veq(q, vset1(2.0f)), veq(q, vset1(6.0f)));
    vf r;
    if (cosine) {
        r = vsel(use_cos, ps, pc);
        r = vsel(vmor(veq(q, vset1(2.0f)), veq(q, vset1(4.0f))), vneg(r), r);
    } else {
        r = vsel(use_cos, pc, ps);
        r = vsel(vge(q, vset1(4.0f)), vneg(r), r);
        r = vsel(vlt(x, vset1(0.0f)), vneg(r), r);
        r = vsel(veq(x, vset1(0.0f)), x, r); /* sin(-0) = -0 */
    }
    vm far = vmor(vgt(ax, vset1(8192.0f)), visnan(x));
    if (vmany(far)) {
        float xs[VW], rs[VW];
        vstore(xs, x);
        vstore(rs, r);
        for (int i = 0; i < VW; i++)
            if (!(fabsf(xs[i]) <= 8192.0f)) rs[i] = cosine ? cosf(xs[i]) : sinf(xs[i]);
        r = vload(rs);
    }
    return r;
}
