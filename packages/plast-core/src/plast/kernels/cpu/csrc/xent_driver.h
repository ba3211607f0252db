/* The drivers of xent.c, written once over VT and included once per element type with VT (float or double),
 * OP3 (plast_op3 / plast_op3_f64), KN(name) (the body functions' and helpers' name: name / name_f64) and
 * PN(name) (the public name: name_f32 / name_f64) defined. */

/* Checks every target; returns the summed weight of the non-ignored ones (the mean's divisor). */
static int KN(check_targets)(ptrdiff_t rows, ptrdiff_t k, const int64_t *t64, const int32_t *t32, const VT *w,
                             int64_t ignore_index, double *wsum, int64_t *bad) {
    double s = 0.0;
    for (ptrdiff_t r = 0; r < rows; r++) {
        int64_t t = target_at(t64, t32, r);
        if (t == ignore_index) continue;
        if (t < 0 || t >= k) {
            *bad = t;
            return PLAST_XENT_BAD_TARGET;
        }
        s += w ? (double)w[t] : 1.0;
    }
    *wsum = s;
    return 0;
}

/* A row of logits as a contiguous pointer: the row itself, or a copy gathered into buf. */
static const VT *KN(row_of)(OP3 x, ptrdiff_t o, ptrdiff_t i, ptrdiff_t k, VT *buf) {
    const VT *p = x.p + o * x.so + i * x.si;
    if (x.sn == 1) return p;
    for (ptrdiff_t c = 0; c < k; c++) buf[c] = p[c * x.sn];
    return buf;
}

/* Thread tid of T's share of the rows: their losses (reduction none) or their sum, returned. */
static double KN(xe_fwd_part)(int simd, ptrdiff_t rows, ptrdiff_t k, ptrdiff_t inner, OP3 x, const int64_t *t64,
                              const int32_t *t32, const VT *w, int64_t ignore_index, VT eps, int reduction, double wall,
                              VT *out, int *fail, int tid, int T) {
    double total = 0.0;
    VT *buf = NULL;
    if (x.sn != 1 && !(buf = malloc((size_t)k * sizeof(VT)))) *fail = 1;
    ptrdiff_t lo, hi;
    plast_omp_range(rows, tid, T, &lo, &hi);
    for (ptrdiff_t r = lo; r < hi; r++) {
        int64_t t = target_at(t64, t32, r);
        VT loss = 0;
        if (t != ignore_index && (x.sn == 1 || buf)) {
            const VT *row = KN(row_of)(x, r / inner, r % inner, k, buf);
            VT lse = PLAST_VEC_CALL_T(KN(xe_lse), row, k);
            VT wt = w ? w[t] : (VT)1;
            loss = -(row[t] - lse) * wt;
            if (eps != 0) {
                VT smooth = -(PLAST_VEC_CALL_T(KN(xe_wsum), row, w, k) - lse * (VT)wall);
                loss = (1 - eps) * loss + eps / (VT)k * smooth;
            }
        }
        if (reduction == PLAST_RED_NONE) out[r] = loss;
        else total += loss;
    }
    free(buf);
    return total;
}

int PN(plast_xent_fwd)(int simd, int nthreads, ptrdiff_t outer, ptrdiff_t k, ptrdiff_t inner, OP3 x, const int64_t *t64,
                       const int32_t *t32, const VT *w, int64_t ignore_index, VT eps, int reduction, VT *out,
                       int64_t *bad) {
    ptrdiff_t rows = outer * inner;
    double wsum = 0.0;
    int rc = KN(check_targets)(rows, k, t64, t32, w, ignore_index, &wsum, bad);
    if (rc) return rc;
    double wall = 0.0; /* sum of all class weights, for the smoothing term */
    for (ptrdiff_t c = 0; c < k; c++) wall += w ? (double)w[c] : 1.0;
    double total = 0.0;
    int fail = 0;
    int nt = threads_for(nthreads, rows * k, rows);
    PLAST_PARALLEL_SUM(nt, total, KN(xe_fwd_part), simd, rows, k, inner, x, t64, t32, w, ignore_index, eps, reduction,
                       wall, out, &fail);
    if (fail) return -2;
    if (reduction == PLAST_RED_MEAN) out[0] = (VT)(total / wsum);
    else if (reduction == PLAST_RED_SUM) out[0] = (VT)total;
    return 0;
}

/* Thread tid of T's share of the rows. */
static void KN(xe_bw_part)(int simd, ptrdiff_t rows, ptrdiff_t k, ptrdiff_t inner, OP3 x, const int64_t *t64,
                           const int32_t *t32, const VT *w, int64_t ignore_index, VT eps, int reduction, double wall,
                           VT dn, const VT *g, OP3 gx, int *fail, int tid, int T) {
    VT *buf = NULL;
    int strided = x.sn != 1 || gx.sn != 1;
    if (strided && !(buf = malloc((size_t)k * 2 * sizeof(VT)))) *fail = 1;
    ptrdiff_t lo, hi;
    plast_omp_range(rows, tid, T, &lo, &hi);
    for (ptrdiff_t r = lo; r < hi; r++) {
        if (strided && !buf) continue;
        ptrdiff_t o = r / inner, i = r % inner;
        int64_t t = target_at(t64, t32, r);
        VT *gp = gx.p + o * gx.so + i * gx.si;
        VT *grow = strided ? buf + k : gp;
        if (t == ignore_index) {
            memset(grow, 0, (size_t)k * sizeof(VT));
        } else {
            const VT *row = KN(row_of)(x, o, i, k, buf);
            VT lse = PLAST_VEC_CALL_T(KN(xe_lse), row, k);
            VT wt = w ? w[t] : (VT)1;
            VT scale = (reduction == PLAST_RED_NONE ? g[r] : g[0]) / dn;
            /* C_c = (1 - eps) wt [c == t] + eps / k * w_c; gx = scale * (p * sum_c C_c - C) */
            VT a = (1 - eps) * wt + eps / (VT)k * (VT)wall;
            PLAST_VEC_DISPATCH_T(KN(xe_grad), row, w, grow, k, lse, scale, a, eps / (VT)k);
            grow[t] -= scale * (1 - eps) * wt;
        }
        if (strided)
            for (ptrdiff_t c = 0; c < k; c++) gp[c * gx.sn] = grow[c];
    }
    free(buf);
}

int PN(plast_xent_bw)(int simd, int nthreads, ptrdiff_t outer, ptrdiff_t k, ptrdiff_t inner, OP3 x, const int64_t *t64,
                      const int32_t *t32, const VT *w, int64_t ignore_index, VT eps, int reduction, const VT *g, OP3 gx,
                      int64_t *bad) {
    ptrdiff_t rows = outer * inner;
    double wsum = 0.0;
    int rc = KN(check_targets)(rows, k, t64, t32, w, ignore_index, &wsum, bad);
    if (rc) return rc;
    double wall = 0.0;
    for (ptrdiff_t c = 0; c < k; c++) wall += w ? (double)w[c] : 1.0;
    VT dn = reduction == PLAST_RED_MEAN ? (VT)wsum : (VT)1;
    int fail = 0;
    int nt = threads_for(nthreads, rows * k, rows);
    PLAST_PARALLEL(nt, KN(xe_bw_part), simd, rows, k, inner, x, t64, t32, w, ignore_index, eps, reduction, wall, dn, g,
                   gx, &fail);
    return fail ? -2 : 0;
}
