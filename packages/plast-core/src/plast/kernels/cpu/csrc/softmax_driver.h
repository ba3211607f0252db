/* The threaded drivers of softmax.c, written once over VT and included once per element type with VT (float
 * or double), OP3 (plast_op3 / plast_op3_f64), KN(name) (the body functions' name: name / name_f64) and
 * PN(name) (the public name: name_f32 / name_f64) defined. */

static void KN(sm_gather)(VT *dst, const VT *src, ptrdiff_t s, ptrdiff_t n) {
    for (ptrdiff_t k = 0; k < n; k++) dst[k] = src[k * s];
}
static void KN(sm_scatter)(VT *dst, ptrdiff_t s, const VT *src, ptrdiff_t n) {
    for (ptrdiff_t k = 0; k < n; k++) dst[k * s] = src[k];
}

/* Thread tid of T's share of the tasks: (o, 16-column block) or (o, i) rows, per to an o. */
static void KN(sm_part)(int simd, int mode, ptrdiff_t n, ptrdiff_t inner, int cols, ptrdiff_t per, ptrdiff_t tasks,
                        OP3 x, OP3 y, int *fail, int tid, int T) {
    VT *buf = NULL;
    if (!cols && (x.sn != 1 || y.sn != 1)) {
        buf = malloc((size_t)n * sizeof(VT));
        if (!buf) *fail = 1;
    }
    ptrdiff_t lo, hi;
    plast_omp_range(tasks, tid, T, &lo, &hi);
    for (ptrdiff_t t = lo; t < hi; t++) {
        ptrdiff_t o = t / per, i = t % per;
        if (cols) {
            ptrdiff_t j = i * 16;
            int w = inner - j < 16 ? (int)(inner - j) : 16;
            PLAST_VEC_DISPATCH_T(KN(softmax_cols16), mode, x.p + o * x.so + j, x.sn, y.p + o * y.so + j, y.sn, n, w);
            continue;
        }
        const VT *xp = x.p + o * x.so + i * x.si;
        VT *yp = y.p + o * y.so + i * y.si;
        if (!buf) {
            if (x.sn == 1 && y.sn == 1) PLAST_VEC_DISPATCH_T(KN(softmax_row), mode, xp, yp, n);
            continue;
        }
        KN(sm_gather)(buf, xp, x.sn, n);
        PLAST_VEC_DISPATCH_T(KN(softmax_row), mode, buf, buf, n);
        KN(sm_scatter)(yp, y.sn, buf, n);
    }
    free(buf);
}

int PN(plast_softmax)(int simd, int nthreads, int mode, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, OP3 x, OP3 y) {
    if (outer == 0 || n == 0 || inner == 0) return 0;
    int cols = inner > 1 && x.si == 1 && y.si == 1;
    ptrdiff_t per = cols ? (inner + 15) / 16 : inner;
    ptrdiff_t tasks = outer * per;
    int nt = threads_for(nthreads, outer * n * inner, tasks);
    int fail = 0;
    PLAST_PARALLEL(nt, KN(sm_part), simd, mode, n, inner, cols, per, tasks, x, y, &fail);
    return fail ? -2 : 0;
}

/* Thread tid of T's share of the tasks, as sm_part. */
static void KN(sm_bw_part)(int simd, int mode, ptrdiff_t n, ptrdiff_t inner, int cols, ptrdiff_t per, ptrdiff_t tasks,
                           OP3 g, OP3 y, OP3 out, int *fail, int tid, int T) {
    VT *buf = NULL;
    if (!cols && (g.sn != 1 || y.sn != 1 || out.sn != 1)) {
        buf = malloc((size_t)n * 3 * sizeof(VT));
        if (!buf) *fail = 1;
    }
    ptrdiff_t lo, hi;
    plast_omp_range(tasks, tid, T, &lo, &hi);
    for (ptrdiff_t t = lo; t < hi; t++) {
        ptrdiff_t o = t / per, i = t % per;
        if (cols) {
            ptrdiff_t j = i * 16;
            int w = inner - j < 16 ? (int)(inner - j) : 16;
            PLAST_VEC_DISPATCH_T(KN(softmax_bw_cols16), mode, g.p + o * g.so + j, g.sn, y.p + o * y.so + j, y.sn,
                                 out.p + o * out.so + j, out.sn, n, w);
            continue;
        }
        const VT *gp = g.p + o * g.so + i * g.si;
        const VT *yp = y.p + o * y.so + i * y.si;
        VT *op = out.p + o * out.so + i * out.si;
        if (!buf) {
            if (g.sn == 1 && y.sn == 1 && out.sn == 1) PLAST_VEC_DISPATCH_T(KN(softmax_bw_row), mode, gp, yp, op, n);
            continue;
        }
        KN(sm_gather)(buf, gp, g.sn, n);
        KN(sm_gather)(buf + n, yp, y.sn, n);
        PLAST_VEC_DISPATCH_T(KN(softmax_bw_row), mode, buf, buf + n, buf + 2 * n, n);
        KN(sm_scatter)(op, out.sn, buf + 2 * n, n);
    }
    free(buf);
}

int PN(plast_softmax_bw)(int simd, int nthreads, int mode, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, OP3 g, OP3 y,
                         OP3 out) {
    if (outer == 0 || n == 0 || inner == 0) return 0;
    int cols = inner > 1 && g.si == 1 && y.si == 1 && out.si == 1;
    ptrdiff_t per = cols ? (inner + 15) / 16 : inner;
    ptrdiff_t tasks = outer * per;
    int nt = threads_for(nthreads, outer * n * inner, tasks);
    int fail = 0;
    PLAST_PARALLEL(nt, KN(sm_bw_part), simd, mode, n, inner, cols, per, tasks, g, y, out, &fail);
    return fail ? -2 : 0;
}

/* Thread tid of T's share of the tasks, as sm_part. */
static void KN(lse_part)(int simd, ptrdiff_t n, ptrdiff_t inner, int cols, ptrdiff_t per, ptrdiff_t tasks, OP3 x,
                         OP3 out, int *fail, int tid, int T) {
    VT *buf = NULL;
    if (!cols && x.sn != 1) {
        buf = malloc((size_t)n * sizeof(VT));
        if (!buf) *fail = 1;
    }
    ptrdiff_t lo, hi;
    plast_omp_range(tasks, tid, T, &lo, &hi);
    for (ptrdiff_t t = lo; t < hi; t++) {
        ptrdiff_t o = t / per, i = t % per;
        if (cols) {
            ptrdiff_t j = i * 16;
            int w = inner - j < 16 ? (int)(inner - j) : 16;
            PLAST_VEC_DISPATCH_T(KN(lse_cols16), x.p + o * x.so + j, x.sn, out.p + o * out.so + j * out.si, out.si, n,
                                 w);
            continue;
        }
        const VT *xp = x.p + o * x.so + i * x.si;
        VT r = 0;
        if (x.sn == 1) {
            r = PLAST_VEC_CALL_T(KN(lse_row), xp, n);
        } else if (buf) {
            KN(sm_gather)(buf, xp, x.sn, n);
            r = PLAST_VEC_CALL_T(KN(lse_row), buf, n);
        }
        out.p[o * out.so + i * out.si] = r;
    }
    free(buf);
}

int PN(plast_logsumexp)(int simd, int nthreads, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner, OP3 x, OP3 out) {
    if (outer == 0 || inner == 0) return 0;
    if (n == 0) {
        for (ptrdiff_t o = 0; o < outer; o++)
            for (ptrdiff_t i = 0; i < inner; i++) out.p[o * out.so + i * out.si] = -INFINITY;
        return 0;
    }
    int cols = inner > 1 && x.si == 1;
    ptrdiff_t per = cols ? (inner + 15) / 16 : inner;
    ptrdiff_t tasks = outer * per;
    int nt = threads_for(nthreads, outer * n * inner, tasks);
    int fail = 0;
    PLAST_PARALLEL(nt, KN(lse_part), simd, n, inner, cols, per, tasks, x, out, &fail);
    return fail ? -2 : 0;
}
