/* The threaded driver of reduce.c, written once over VT and included once per element type with VT (float or
 * double), OP3 (its plast_op3 type), RD_COLS (column block of the leading-dim path), KN(name) (the body
 * functions' name: name / name_f64) and PN(name) (the public name: name_f32 / name_f64) defined. */

static double KN(run_contig)(int simd, int op, const VT *x, ptrdiff_t n) {
    if (op == PLAST_RD_SUM) return PLAST_VEC_CALL_T(KN(rd_sum), x, n);
    return (double)PLAST_VEC_CALL_T(KN(rd_ext), x, n, op == PLAST_RD_MAX);
}

/* Task t of the few-long-rows path: chunk t % per of row t / per, into part[t]. */
static inline void KN(rd_chunk_task)(int simd, int op, OP3 x, ptrdiff_t n, ptrdiff_t per, double *part, ptrdiff_t t) {
    ptrdiff_t o = t / per, c = t % per, s = c * CHUNK;
    part[t] = KN(run_contig)(simd, op, x.p + o * x.so + s, n - s < CHUNK ? n - s : CHUNK);
}

/* Row o of the contiguous-rows path. */
static inline void KN(rd_row_task)(int simd, int op, OP3 x, ptrdiff_t n, VT *out, ptrdiff_t o) {
    out[o] = (VT)KN(run_contig)(simd, op, x.p + o * x.so, n);
}

/* Task t of the leading-dim path: columns [j, j + cols) of row t / per, j = (t % per) * cols. */
static inline void KN(rd_cols_task)(int simd, int op, OP3 x, ptrdiff_t n, ptrdiff_t inner, ptrdiff_t cols,
                                    ptrdiff_t per, VT *out, ptrdiff_t t) {
    ptrdiff_t o = t / per, j = (t % per) * cols;
    ptrdiff_t w = inner - j < cols ? inner - j : cols;
    PLAST_VEC_DISPATCH_T(KN(rd_cols), op, x.p + o * x.so + j, x.sn, n, out + o * inner + j, w);
}

/* Output t of the strided path. */
static inline void KN(rd_strided_task)(int op, OP3 x, ptrdiff_t n, ptrdiff_t inner, VT *out, ptrdiff_t t) {
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

int PN(plast_reduce)(int simd, int nthreads, int op, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, OP3 x, VT *out) {
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
            PLAST_PARALLEL_FOR(nt, tasks, KN(rd_chunk_task), simd, op, x, n, per, part);
            for (ptrdiff_t o = 0; o < outer; o++) out[o] = (VT)combine_all(op, part + o * per, per);
            free(part);
            return 0;
        }
        int nt = threads_for(nthreads, outer * n, outer);
        PLAST_PARALLEL_FOR(nt, outer, KN(rd_row_task), simd, op, x, n, out);
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
        PLAST_PARALLEL_FOR(nt, tasks, KN(rd_cols_task), simd, op, x, n, inner, cols, per, out);
        return 0;
    }
    /* anything else: strided loops in double (sums in blocks of 64, as the column path) */
    ptrdiff_t tasks = outer * inner;
    int nt = threads_for(nthreads, outer * n * inner, tasks);
    PLAST_PARALLEL_FOR(nt, tasks, KN(rd_strided_task), op, x, n, inner, out);
    return 0;
}
