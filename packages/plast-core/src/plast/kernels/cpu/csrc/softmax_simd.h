/* Level-generic body of softmax.c over VT (float or double): contiguous rows and blocks of up to VW contiguous
 * columns. */

#ifndef SM_SLOG
#define SM_SLOG(x) _Generic((x), float: logf, default: log)(x)
#endif

VTARGET static VT VN(sm_max)(const VT *x, ptrdiff_t n) {
    vf m0 = vset1(-INFINITY), m1 = m0;
    ptrdiff_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        m0 = vmax(m0, vload(x + i));
        m1 = vmax(m1, vload(x + i + VW));
    }
    for (; i + VW <= n; i += VW) m0 = vmax(m0, vload(x + i));
    if (i < n) m1 = vmax(m1, vloadn_fill(x + i, n - i, -INFINITY));
    return vhmax(vmax(m0, m1));
}

/* sum(exp(x - m)), storing the terms in y unless y is NULL */
VTARGET static VT VN(sm_expsum)(const VT *x, VT *y, ptrdiff_t n, VT m) {
    vf mv = vset1(m), s0 = vset1(0.0f), s1 = s0;
    ptrdiff_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        vf e0 = VN(v_exp)(vsub(vload(x + i), mv));
        vf e1 = VN(v_exp)(vsub(vload(x + i + VW), mv));
        if (y) {
            vstore(y + i, e0);
            vstore(y + i + VW, e1);
        }
        s0 = vadd(s0, e0);
        s1 = vadd(s1, e1);
    }
    for (; i + VW <= n; i += VW) {
        vf e = VN(v_exp)(vsub(vload(x + i), mv));
        if (y) vstore(y + i, e);
        s0 = vadd(s0, e);
    }
    if (i < n) {
        /* lanes past the end load -inf: exp(-inf - m) adds 0 (NaN when m is -inf, as the real lanes are) */
        vf e = VN(v_exp)(vsub(vloadn_fill(x + i, n - i, -INFINITY), mv));
        if (y) vstoren(y + i, e, n - i);
        s1 = vadd(s1, e);
    }
    return vhsum(vadd(s0, s1));
}

VTARGET static VT VN(sm_dot)(const VT *a, const VT *b, ptrdiff_t n) {
    vf s0 = vset1(0.0f), s1 = s0;
    ptrdiff_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        s0 = vfma(vload(a + i), vload(b + i), s0);
        s1 = vfma(vload(a + i + VW), vload(b + i + VW), s1);
    }
    for (; i + VW <= n; i += VW) s0 = vfma(vload(a + i), vload(b + i), s0);
    if (i < n) s1 = vfma(vloadn(a + i, n - i), vloadn(b + i, n - i), s1);
    return vhsum(vadd(s0, s1));
}

VTARGET static VT VN(sm_sum)(const VT *a, ptrdiff_t n) {
    vf s0 = vset1(0.0f), s1 = s0;
    ptrdiff_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        s0 = vadd(s0, vload(a + i));
        s1 = vadd(s1, vload(a + i + VW));
    }
    for (; i + VW <= n; i += VW) s0 = vadd(s0, vload(a + i));
    if (i < n) s1 = vadd(s1, vloadn(a + i, n - i));
    return vhsum(vadd(s0, s1));
}

VTARGET static void VN(softmax_row)(int mode, const VT *x, VT *y, ptrdiff_t n) {
    VT m = VN(sm_max)(x, n);
    if (mode == PLAST_SM_SAFE_SOFTMAX && m == -INFINITY) {
        memset(y, 0, (size_t)n * sizeof(VT));
        return;
    }
    ptrdiff_t i = 0;
    if (mode == PLAST_SM_LOG_SOFTMAX) {
        VT ls = SM_SLOG(VN(sm_expsum)(x, NULL, n, m));
        vf mv = vset1(m), lv = vset1(ls);
        for (; i + VW <= n; i += VW) vstore(y + i, vsub(vsub(vload(x + i), mv), lv));
        if (i < n) vstoren(y + i, vsub(vsub(vloadn(x + i, n - i), mv), lv), n - i);
        return;
    }
    vf inv = vset1((VT)1 / VN(sm_expsum)(x, y, n, m));
    for (; i + VW <= n; i += VW) vstore(y + i, vmul(vload(y + i), inv));
    if (i < n) vstoren(y + i, vmul(vloadn(y + i, n - i), inv), n - i);
}

VTARGET static void VN(softmax_bw_row)(int mode, const VT *g, const VT *y, VT *out, ptrdiff_t n) {
    ptrdiff_t i = 0;
    if (mode == PLAST_SM_LOG_SOFTMAX) {
        vf s = vset1(VN(sm_sum)(g, n));
        for (; i + VW <= n; i += VW) vstore(out + i, vfnma(VN(v_exp)(vload(y + i)), s, vload(g + i)));
        if (i < n) vstoren(out + i, vfnma(VN(v_exp)(vloadn(y + i, n - i)), s, vloadn(g + i, n - i)), n - i);
        return;
    }
    vf d = vset1(VN(sm_dot)(g, y, n));
    for (; i + VW <= n; i += VW) vstore(out + i, vmul(vload(y + i), vsub(vload(g + i), d)));
    if (i < n) vstoren(out + i, vmul(vloadn(y + i, n - i), vsub(vloadn(g + i, n - i), d)), n - i);
}

VTARGET static VT VN(lse_row)(const VT *x, ptrdiff_t n) {
    VT m = VN(sm_max)(x, n);
    if (isinf(m)) m = 0; /* all -inf gives -inf, any +inf gives +inf */
    return SM_SLOG(VN(sm_expsum)(x, NULL, n, m)) + m;
}

/* ---- w <= VW contiguous columns at once, n steps of stride xn / yn ---- */
#define CLD(p, fill) (w == VW ? vload(p) : vloadn_fill(p, w, fill))
#define CST(p, v)                                                                                                      \
    do {                                                                                                               \
        if (w == VW) vstore(p, v);                                                                                     \
        else vstoren(p, v, w);                                                                                         \
    } while (0)

VTARGET static void VN(softmax_cols)(int mode, const VT *x, ptrdiff_t xn, VT *y, ptrdiff_t yn, ptrdiff_t n, int w) {
    vf m = vset1(-INFINITY), s = vset1(0.0f);
    for (ptrdiff_t k = 0; k < n; k++) m = vmax(m, CLD(x + k * xn, -INFINITY));
    vf safe_m = m;
    if (mode == PLAST_SM_SAFE_SOFTMAX) safe_m = vsel(veq(m, vset1(-INFINITY)), vset1(0.0f), m);
    for (ptrdiff_t k = 0; k < n; k++) {
        vf e = VN(v_exp)(vsub(CLD(x + k * xn, 0.0f), safe_m));
        if (mode != PLAST_SM_LOG_SOFTMAX) CST(y + k * yn, e);
        s = vadd(s, e);
    }
    if (mode == PLAST_SM_LOG_SOFTMAX) {
        vf ls = VN(v_log)(s);
        for (ptrdiff_t k = 0; k < n; k++) CST(y + k * yn, vsub(vsub(CLD(x + k * xn, 0.0f), m), ls));
        return;
    }
    vf inv = vdiv(vset1(1.0f), s);
    if (mode == PLAST_SM_SAFE_SOFTMAX) inv = vsel(veq(s, vset1(0.0f)), vset1(0.0f), inv);
    for (ptrdiff_t k = 0; k < n; k++) CST(y + k * yn, vmul(CLD(y + k * yn, 0.0f), inv));
}

VTARGET static void VN(softmax_bw_cols)(int mode, const VT *g, ptrdiff_t gn, const VT *y, ptrdiff_t yn, VT *out,
                                        ptrdiff_t on, ptrdiff_t n, int w) {
    vf s = vset1(0.0f);
    if (mode == PLAST_SM_LOG_SOFTMAX) {
        for (ptrdiff_t k = 0; k < n; k++) s = vadd(s, CLD(g + k * gn, 0.0f));
        for (ptrdiff_t k = 0; k < n; k++)
            CST(out + k * on, vfnma(VN(v_exp)(CLD(y + k * yn, 0.0f)), s, CLD(g + k * gn, 0.0f)));
        return;
    }
    for (ptrdiff_t k = 0; k < n; k++) s = vfma(CLD(g + k * gn, 0.0f), CLD(y + k * yn, 0.0f), s);
    for (ptrdiff_t k = 0; k < n; k++) CST(out + k * on, vmul(CLD(y + k * yn, 0.0f), vsub(CLD(g + k * gn, 0.0f), s)));
}

VTARGET static void VN(lse_cols)(const VT *x, ptrdiff_t xn, VT *out, ptrdiff_t n, int w) {
    vf m = vset1(-INFINITY), s = vset1(0.0f);
    for (ptrdiff_t k = 0; k < n; k++) m = vmax(m, CLD(x + k * xn, -INFINITY));
    m = vsel(veq(vabs(m), vset1(INFINITY)), vset1(0.0f), m);
    for (ptrdiff_t k = 0; k < n; k++) s = vadd(s, VN(v_exp)(vsub(CLD(x + k * xn, 0.0f), m)));
    CST(out, vadd(VN(v_log)(s), m));
}
#undef CLD
#undef CST

/* blocks of 16 columns (one task), split into this level's vector width */
VTARGET static void VN(softmax_cols16)(int mode, const VT *x, ptrdiff_t xn, VT *y, ptrdiff_t yn, ptrdiff_t n, int w16) {
    for (int j = 0; j < w16; j += VW) VN(softmax_cols)(mode, x + j, xn, y + j, yn, n, w16 - j < VW ? w16 - j : VW);
}
VTARGET static void VN(softmax_bw_cols16)(int mode, const VT *g, ptrdiff_t gn, const VT *y, ptrdiff_t yn, VT *out,
                                          ptrdiff_t on, ptrdiff_t n, int w16) {
    for (int j = 0; j < w16; j += VW)
        VN(softmax_bw_cols)(mode, g + j, gn, y + j, yn, out + j, on, n, w16 - j < VW ? w16 - j : VW);
}
VTARGET static void VN(lse_cols16)(const VT *x, ptrdiff_t xn, VT *out, ptrdiff_t osi, ptrdiff_t n, int w16) {
    if (osi != 1) { /* strided output: one column at a time through a small buffer */
        VT tmp[16];
        for (int j = 0; j < w16; j += VW) VN(lse_cols)(x + j, xn, tmp + j, n, w16 - j < VW ? w16 - j : VW);
        for (int j = 0; j < w16; j++) out[j * osi] = tmp[j];
        return;
    }
    for (int j = 0; j < w16; j += VW) VN(lse_cols)(x + j, xn, out + j, n, w16 - j < VW ? w16 - j : VW);
}
