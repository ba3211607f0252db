/* The threaded drivers of layernorm.c, written once over VT and included once per element type with VT (float
 * or double), KN(name) (the body functions' name: name / name_f64) and PN(name) (the public name: name_f32 /
 * name_f64) defined. */

/* Row r of the forward. */
static inline void KN(ln_fwd_task)(int simd, const VT *x, ptrdiff_t x_row, const VT *w, const VT *b, VT eps, VT *y,
                                   ptrdiff_t n, VT *mean, VT *rstd, ptrdiff_t r) {
    PLAST_VEC_DISPATCH_T(KN(ln_row), x + r * x_row, w, b, eps, y + r * n, n, mean + r, rstd + r);
}

int PN(plast_layer_norm)(int simd, int nthreads, ptrdiff_t rows, ptrdiff_t n, const VT *x, ptrdiff_t x_row, const VT *w,
                         const VT *b, VT eps, VT *y, VT *mean, VT *rstd) {
    if (rows == 0) return 0;
    if (n == 0) {
        for (ptrdiff_t r = 0; r < rows; r++) mean[r] = rstd[r] = NAN;
        return 0;
    }
    int nt = threads_for(nthreads, rows * n, rows);
    PLAST_PARALLEL_FOR(nt, rows, KN(ln_fwd_task), simd, x, x_row, w, b, eps, y, n, mean, rstd);
    return 0;
}

/* Thread tid of T's share of the rows; thread 0 accumulates straight into gw/gb, thread t > 0 into its part of
 * scratch. */
static void KN(ln_bw_part)(int simd, ptrdiff_t rows, ptrdiff_t n, const VT *gy, ptrdiff_t gy_row, const VT *x,
                           ptrdiff_t x_row, const VT *mean, const VT *rstd, const VT *w, VT *gx, VT *gw, VT *gb,
                           VT *scratch, int tid, int T) {
    VT *gwa = tid == 0 ? gw : scratch + (size_t)(tid - 1) * 2 * (size_t)n;
    VT *gba = tid == 0 ? gb : gwa + n;
    ptrdiff_t lo, hi;
    plast_omp_range(rows, tid, T, &lo, &hi);
    for (ptrdiff_t r = lo; r < hi; r++)
        PLAST_VEC_DISPATCH_T(KN(ln_bw_row), gy + r * gy_row, x + r * x_row, mean[r], rstd[r], w, gx + r * n, gwa, gba,
                             n);
}

int PN(plast_layer_norm_bw)(int simd, int nthreads, ptrdiff_t rows, ptrdiff_t n, const VT *gy, ptrdiff_t gy_row,
                            const VT *x, ptrdiff_t x_row, const VT *mean, const VT *rstd, const VT *w, VT *gx, VT *gw,
                            VT *gb) {
    memset(gw, 0, (size_t)n * sizeof(VT));
    memset(gb, 0, (size_t)n * sizeof(VT));
    if (rows == 0 || n == 0) return 0;
    int nt = threads_for(nthreads, rows * n, rows);
    /* thread 0 accumulates straight into gw/gb; the others into scratch added at the end */
    VT *scratch = NULL;
    if (nt > 1) {
        scratch = calloc((size_t)(nt - 1) * 2 * (size_t)n, sizeof(VT));
        if (!scratch) return -2;
    }
    PLAST_PARALLEL(nt, KN(ln_bw_part), simd, rows, n, gy, gy_row, x, x_row, mean, rstd, w, gx, gw, gb, scratch);
    for (int t = 1; t < nt; t++) {
        VT *s = scratch + (size_t)(t - 1) * 2 * (size_t)n;
        PLAST_VEC_DISPATCH_T(KN(ln_add), gw, s, n);
        PLAST_VEC_DISPATCH_T(KN(ln_add), gb, s + n, n);
    }
    free(scratch);
    return 0;
}
