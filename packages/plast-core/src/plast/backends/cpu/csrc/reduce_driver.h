/* The threaded driver of reduce.c, written once over VT and included once per element type with VT (float or
 * double), OP3 (its plast_op3 type), RD_COLS (column block of the leading-dim path), KN(name) (the body
 * functions' name: name / name_f64) and PN(name) (the public name: name_f32 / name_f64) defined. */

static double KN(run_contig)(int simd, int op, const VT *x, ptrdiff_t n) {
    if (op == PLAST_RD_SUM) return PLAST_VEC_CALL_T(KN(rd_sum), x, n);
    return (double)PLAST_VEC_CALL_T(KN(rd_ext), x, n, op == PLAST_RD_MAX);
}

int PN(plast_reduce)(int simd, int nthreads, int op, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, OP3 x,
                     VT *out) {
    if (op < 0 || op > PLAST_RD_MIN) return -1;
    if (outer == 0 || inner == 0) return 0;
    if (n == 0) {
        if (op != PLAST_RD_SUM) return -1; /* max/min of nothing: the op layer raises before this */
        memset(out, 0, (size_t)(outer * inner) * sizeof(VT));
        return 0;
    }
    if (inner == 1 && x.sn == 1) {
        ptrdiff_t per = (n + CHUNK - 1) / CHUNK;
        if (per > 1 && outer < 4 * (ptrdiff_t)nthreads) {
            /* few long rows: chunks in parallel, then each row's chunks combined (pairwise for sums) */
            ptrdiff_t tasks = outer * per;
            double *part = malloc((size_t)tasks * sizeof(double));
            if (!part) return -2;
            int nt = threads_for(nthreads, outer * n, tasks);
            (void)nt; /* unused without OpenMP */
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
            for (ptrdiff_t t = 0; t < tasks; t++) {
                ptrdiff_t o = t / per, c = t % per, s = c * CHUNK;
                part[t] = KN(run_contig)(simd, op, x.p + o * x.so + s, n - s < CHUNK ? n - s : CHUNK);
            }
            for (ptrdiff_t o = 0; o < outer; o++) out[o] = (VT)combine_all(op, part + o * per, per);
            free(part);
            return 0;
        }
        int nt = threads_for(nthreads, outer * n, outer);
        (void)nt; /* unused without OpenMP */
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
        for (ptrdiff_t o = 0; o < outer; o++) out[o] = (VT)KN(run_contig)(simd, op, x.p + o * x.so, n);
        return 0;
    }
    if (x.si == 1) {
        /* whole rows per task where possible (contiguous streams); split columns only to feed the threads */
        int want = threads_for(nthreads, outer * n * inner, inner / 16 > 1 ? inner / 16 : 1);
        ptrdiff_t cols = outer >= want ? inner : (inner + want - 1) / want;
        cols = (cols + 15) & ~(ptrdiff_t)15;
        if (cols > RD_COLS) cols = RD_COLS;
        ptrdiff_t per = (inner + cols - 1) / cols, tasks = outer * per;
        int nt = threads_for(nthreads, outer * n * inner, tasks);
        (void)nt; /* unused without OpenMP */
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
        for (ptrdiff_t t = 0; t < tasks; t++) {
            ptrdiff_t o = t / per, j = (t % per) * cols;
            ptrdiff_t w = inner - j < cols ? inner - j : cols;
            PLAST_VEC_DISPATCH_T(KN(rd_cols), op, x.p + o * x.so + j, x.sn, n, out + o * inner + j, w);
        }
        return 0;
    }
    /* anything else: strided loops in double (sums in blocks of 64, as the column path) */
    ptrdiff_t tasks = outer * inner;
    int nt = threads_for(nthreads, outer * n * inner, tasks);
    (void)nt; /* unused without OpenMP */
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (ptrdiff_t t = 0; t < tasks; t++) {
        const VT *p = x.p + (t / inner) * x.so + (t % inner) * x.si;
        double r;
        if (op == PLAST_RD_SUM) {
            r = 0.0;
            for (ptrdiff_t k0 = 0; k0 < n; k0 += 64) {
                double b = 0.0;
                for (ptrdiff_t k = k0; k < n && k < k0 + 64; k++) b += (double)p[k * x.sn];
                r += b;
            }
        } else {
            r = (double)p[0];
            for (ptrdiff_t k = 1; k < n; k++) r = combine(op, r, (double)p[k * x.sn]);
        }
        out[t] = (VT)r;
    }
    return 0;
}
