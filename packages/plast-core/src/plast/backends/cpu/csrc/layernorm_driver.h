/* The threaded drivers of layernorm.c, written once over VT and included once per element type with VT (float
 * or double), KN(name) (the body functions' name: name / name_f64) and PN(name) (the public name: name_f32 /
 * name_f64) defined. */

int PN(plast_layer_norm)(int simd, int nthreads, ptrdiff_t rows, ptrdiff_t n, const VT *x, ptrdiff_t x_row,
                         const VT *w, const VT *b, VT eps, VT *y, VT *mean, VT *rstd) {
    if (rows == 0) return 0;
    if (n == 0) {
        for (ptrdiff_t r = 0; r < rows; r++) mean[r] = rstd[r] = NAN;
        return 0;
    }
    int nt = threads_for(nthreads, rows * n, rows);
    (void)nt; /* unused without OpenMP */
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (ptrdiff_t r = 0; r < rows; r++)
        PLAST_VEC_DISPATCH_T(KN(ln_row), x + r * x_row, w, b, eps, y + r * n, n, mean + r, rstd + r);
    return 0;
}

int PN(plast_layer_norm_bw)(int simd, int nthreads, ptrdiff_t rows, ptrdiff_t n, const VT *gy,
                            ptrdiff_t gy_row, const VT *x, ptrdiff_t x_row, const VT *mean, const VT *rstd,
                            const VT *w, VT *gx, VT *gw, VT *gb) {
    memset(gw, 0, (size_t)n * sizeof(VT));
    memset(gb, 0, (size_t)n * sizeof(VT));
    if (rows == 0 || n == 0) return 0;
    int nt = threads_for(nthreads, rows * n, rows);
    (void)nt; /* unused without OpenMP */
    /* thread 0 accumulates straight into gw/gb; the others into scratch added at the end */
    VT *scratch = NULL;
    if (nt > 1) {
        scratch = calloc((size_t)(nt - 1) * 2 * (size_t)n, sizeof(VT));
        if (!scratch) return -2;
    }
#if PLAST_HAVE_OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int tid = 0;
#if PLAST_HAVE_OPENMP
        tid = omp_get_thread_num();
#endif
        VT *gwa = tid == 0 ? gw : scratch + (size_t)(tid - 1) * 2 * (size_t)n;
        VT *gba = tid == 0 ? gb : gwa + n;
#if PLAST_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
        for (ptrdiff_t r = 0; r < rows; r++)
            PLAST_VEC_DISPATCH_T(KN(ln_bw_row), gy + r * gy_row, x + r * x_row, mean[r], rstd[r], w, gx + r * n,
                                 gwa, gba, n);
    }
    for (int t = 1; t < nt; t++) {
        VT *s = scratch + (size_t)(t - 1) * 2 * (size_t)n;
        PLAST_VEC_DISPATCH_T(KN(ln_add), gw, s, n);
        PLAST_VEC_DISPATCH_T(KN(ln_add), gb, s + n, n);
    }
    free(scratch);
    return 0;
}
