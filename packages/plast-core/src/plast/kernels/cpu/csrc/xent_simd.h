/* Level-generic body of xent.c over VT (float or double): one contiguous row of k logits. */

#ifndef XE_SLOG
#define XE_SLOG(x) _Generic((x), float: logf, default: log)(x)
#endif

VTARGET static VT VN(xe_lse)(const VT *x, ptrdiff_t k) {
    vf m0 = vset1(-INFINITY);
    ptrdiff_t i = 0;
    for (; i + VW <= k; i += VW) m0 = vmax(m0, vload(x + i));
    if (i < k) m0 = vmax(m0, vloadn_fill(x + i, k - i, -INFINITY));
    VT m = vhmax(m0);
    /* a +inf logit: torch's log_softmax is nan over the whole row (inf - inf), so its loss and gradient are nan */
    if (m == INFINITY) return (VT)NAN;
    if (isinf(m)) m = 0;
    vf mv = vset1(m), s = vset1(0.0f);
    for (i = 0; i + VW <= k; i += VW) s = vadd(s, VN(v_exp)(vsub(vload(x + i), mv)));
    if (i < k) s = vadd(s, VN(v_exp)(vsub(vloadn_fill(x + i, k - i, -INFINITY), mv)));
    return XE_SLOG(vhsum(s)) + m;
}

/* sum_c w_c x_c (w NULL: sum_c x_c) */
VTARGET static VT VN(xe_wsum)(const VT *x, const VT *w, ptrdiff_t k) {
    vf s = vset1(0.0f);
    ptrdiff_t i = 0;
    for (; i + VW <= k; i += VW) s = w ? vfma(vload(x + i), vload(w + i), s) : vadd(s, vload(x + i));
    if (i < k) s = w ? vfma(vloadn(x + i, k - i), vloadn(w + i, k - i), s) : vadd(s, vloadn(x + i, k - i));
    return vhsum(s);
}

/* gx_c = scale * (exp(x_c - lse) * a - b * w_c)   (w NULL: w_c = 1) */
VTARGET static void VN(xe_grad)(const VT *x, const VT *w, VT *gx, ptrdiff_t k, VT lse, VT scale, VT a, VT b) {
    vf lv = vset1(lse), sv = vset1(scale), av = vset1(a), bv = vset1(b);
    ptrdiff_t i = 0;
    for (; i + VW <= k; i += VW) {
        vf p = VN(v_exp)(vsub(vload(x + i), lv));
        vf c = w ? vmul(bv, vload(w + i)) : bv;
        vstore(gx + i, vmul(sv, vfms_exact(p, av, c)));
    }
    if (i < k) {
        vf p = VN(v_exp)(vsub(vloadn(x + i, k - i), lv));
        vf c = w ? vmul(bv, vloadn(w + i, k - i)) : bv;
        vstoren(gx + i, vmul(sv, vfms_exact(p, av, c)), k - i);
    }
}
