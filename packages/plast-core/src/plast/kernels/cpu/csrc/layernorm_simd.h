/* Level-generic body of layernorm.c over VT (float or double). */

#ifndef LN_SSQRT
#define LN_SSQRT(x) _Generic((x), float: sqrtf, default: sqrt)(x)
#endif

VTARGET static void VN(ln_row)(const VT *x, const VT *w, const VT *b, VT eps, VT *y, ptrdiff_t n, VT *mean_out,
                               VT *rstd_out) {
    vf s = vset1(0.0f);
    ptrdiff_t i = 0;
    for (; i + VW <= n; i += VW) s = vadd(s, vload(x + i));
    if (i < n) s = vadd(s, vloadn(x + i, n - i));
    VT mean = vhsum(s) / (VT)n;
    vf mv = vset1(mean), q = vset1(0.0f);
    for (i = 0; i + VW <= n; i += VW) {
        vf d = vsub(vload(x + i), mv);
        q = vfma(d, d, q);
    }
    if (i < n) {
        vf d = vsub(vloadn_fill(x + i, n - i, mean), mv); /* lanes past the end add 0 */
        q = vfma(d, d, q);
    }
    VT rstd = 1 / LN_SSQRT(vhsum(q) / (VT)n + eps);
    *mean_out = mean;
    *rstd_out = rstd;
    vf rv = vset1(rstd);
    for (i = 0; i + VW <= n; i += VW) {
        vf v = vmul(vsub(vload(x + i), mv), rv);
        if (w) v = vmul(v, vload(w + i));
        if (b) v = vadd(v, vload(b + i));
        vstore(y + i, v);
    }
    if (i < n) {
        vf v = vmul(vsub(vloadn(x + i, n - i), mv), rv);
        if (w) v = vmul(v, vloadn(w + i, n - i));
        if (b) v = vadd(v, vloadn(b + i, n - i));
        vstoren(y + i, v, n - i);
    }
}

/* gx for one row; adds gy * xhat into gw_acc and gy into gb_acc */
VTARGET static void VN(ln_bw_row)(const VT *gy, const VT *x, VT mean, VT rstd, const VT *w, VT *gx, VT *gw_acc,
                                  VT *gb_acc, ptrdiff_t n) {
    vf mv = vset1(mean), rv = vset1(rstd), s1 = vset1(0.0f), s2 = vset1(0.0f);
    ptrdiff_t i = 0;
    for (; i + VW <= n; i += VW) {
        vf g = vload(gy + i);
        vf xh = vmul(vsub(vload(x + i), mv), rv);
        vf gh = w ? vmul(g, vload(w + i)) : g;
        s1 = vadd(s1, gh);
        s2 = vfma(gh, xh, s2);
        vstore(gw_acc + i, vfma(g, xh, vload(gw_acc + i)));
        vstore(gb_acc + i, vadd(g, vload(gb_acc + i)));
    }
    if (i < n) {
        ptrdiff_t r = n - i;
        (void)r;
        vf g = vloadn(gy + i, r);
        vf xh = vmul(vsub(vloadn(x + i, r), mv), rv);
        vf gh = w ? vmul(g, vloadn(w + i, r)) : g;
        s1 = vadd(s1, gh);
        s2 = vfma(gh, xh, s2);
        vstoren(gw_acc + i, vfma(g, xh, vloadn(gw_acc + i, r)), r);
        vstoren(gb_acc + i, vadd(g, vloadn(gb_acc + i, r)), r);
    }
    vf c1 = vset1(vhsum(s1) / (VT)n), c2 = vset1(vhsum(s2) / (VT)n);
    for (i = 0; i + VW <= n; i += VW) {
        vf g = vload(gy + i);
        vf xh = vmul(vsub(vload(x + i), mv), rv);
        vf gh = w ? vmul(g, vload(w + i)) : g;
        vstore(gx + i, vmul(rv, vsub(vsub(gh, c1), vmul(xh, c2))));
    }
    if (i < n) {
        ptrdiff_t r = n - i;
        (void)r;
        vf g = vloadn(gy + i, r);
        vf xh = vmul(vsub(vloadn(x + i, r), mv), rv);
        vf gh = w ? vmul(g, vloadn(w + i, r)) : g;
        vstoren(gx + i, vmul(rv, vsub(vsub(gh, c1), vmul(xh, c2))), r);
    }
}

VTARGET static void VN(ln_add)(VT *dst, const VT *src, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + VW <= n; i += VW) vstore(dst + i, vadd(vload(dst + i), vload(src + i)));
    if (i < n) vstoren(dst + i, vadd(vloadn(dst + i, n - i), vloadn(src + i, n - i)), n - i);
}
