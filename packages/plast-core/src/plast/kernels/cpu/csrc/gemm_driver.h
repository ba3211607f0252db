/* GEMM driver template: blocking, the choice between packed and direct B, threading and batching for one
 * element type. Included by gemm.c with DT (element type) and DS (f32 / f64) defined. */

#define DCAT_(a, b) a##_##b
#define DCAT(a, b)  DCAT_(a, b)
#define DNAME(x)    DCAT(x, DS)
#define DEP         DCAT(gemm_ep, DS)
#define DKERNELS    DCAT(gemm_kernels, DS)

#ifndef DOT_ROWS_MAX_M
#define DOT_ROWS_MAX_M 4 /* up to this many rows of op(A), a transposed B is read in place (dot_rows) */
#endif
#ifndef DOT_ROWS_MIN_K
#define DOT_ROWS_MIN_K 64 /* shorter dot products spend more on summing lanes than on multiplying: pack B */
#endif

static const DKERNELS *DNAME(kernels_for)(int simd) {
    simd = plast_gemm_clamp_simd(simd);
#if PLAST_X86
    if (simd >= PLAST_SIMD_AVX512) return &DCAT(plast_gemm_kernels, DCAT(DS, avx512));
    if (simd >= PLAST_SIMD_AVX2) return &DCAT(plast_gemm_kernels, DCAT(DS, avx2));
#endif
    return &DCAT(plast_gemm_kernels, DCAT(DS, scalar));
}

static void DNAME(ep_from_public)(DEP *e, const plast_gemm_epilogue *ep) {
    e->bias_col = (const DT *)ep->bias_col;
    e->bias_row = (const DT *)ep->bias_row;
    e->res = (const DT *)ep->residual;
    e->ldr = ep->ldr;
    e->act = ep->act;
}

/* The epilogue seen from the sub-block whose origin is (i0, j0). */
static DEP DNAME(ep_at)(const DEP *e, ptrdiff_t i0, ptrdiff_t j0) {
    DEP r = *e;
    if (r.bias_col) r.bias_col += j0;
    if (r.bias_row) r.bias_row += i0;
    if (r.res) r.res += i0 * r.ldr + j0;
    return r;
}

/* Whether reading op(B) in place beats packing it: only when B is row-major (not trans_b), and then when few
 * micro-rows reuse each packed B element (small M), or when the whole of B is small enough to stay in L1/L2
 * without the cache-set conflicts that long power-of-two rows would cause in a packed-less walk. */
static int DNAME(direct_b)(const DKERNELS *kr, int trans_b, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K) {
    if (trans_b) return 0;
    if (M <= 2 * kr->mr) return 1;
    return (size_t)K * (size_t)N * sizeof(DT) <= (size_t)48 * 1024;
}

/* One thread's product on an M x N x K problem. C, A, B and e are already offset to this sub-problem. */
static int DNAME(serial)(const DKERNELS *kr, int ta, int tb, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, DT alpha,
                         const DT *A, ptrdiff_t lda, const DT *B, ptrdiff_t ldb, DT beta, DT *C, ptrdiff_t ldc,
                         const DEP *e) {
    const ptrdiff_t mr = kr->mr, nr = kr->nr;
    /* Even splits: K = 400 with kc 384 becomes 2 x 200, not 384 + 16. */
    const ptrdiff_t kc = K <= kr->kc ? K : gemm_cdiv(K, gemm_cdiv(K, kr->kc));
    const ptrdiff_t mb = M <= kr->mb ? M : gemm_round_up(gemm_cdiv(M, gemm_cdiv(M, kr->mb)), mr);
    const ptrdiff_t nb = N <= kr->nb ? N : gemm_round_up(gemm_cdiv(N, gemm_cdiv(N, kr->nb)), nr);
    const int pack_b = !DNAME(direct_b)(kr, tb, M, N, K);

    const size_t a_elems = (size_t)gemm_round_up(mb, mr) * (size_t)kc;
    const size_t b_elems = pack_b ? (size_t)gemm_round_up(nb, nr) * (size_t)kc : 0;
    DT *pa = (DT *)gemm_scratch((a_elems + b_elems) * sizeof(DT) + 64);
    if (!pa) return PLAST_GEMM_ENOMEM;
    DT *pb = pa + gemm_round_up((ptrdiff_t)a_elems, 64 / (ptrdiff_t)sizeof(DT));

    for (ptrdiff_t ic = 0; ic < M; ic += mb) {
        const ptrdiff_t m = M - ic < mb ? M - ic : mb;
        for (ptrdiff_t pc = 0; pc < K; pc += kc) {
            const ptrdiff_t k = K - pc < kc ? K - pc : kc;
            kr->pack_a(ta, ta ? A + pc * lda + ic : A + ic * lda + pc, lda, m, k, pa);
            const DT beta_k = pc == 0 ? beta : (DT)1;
            const int last = pc + k >= K;
            for (ptrdiff_t jc = 0; jc < N; jc += nb) {
                const ptrdiff_t n = N - jc < nb ? N - jc : nb;
                const DT *Bblk = tb ? B + jc * ldb + pc : B + pc * ldb + jc;
                DEP eb;
                const DEP *ep = NULL;
                if (e && last) {
                    eb = DNAME(ep_at)(e, ic, jc);
                    ep = &eb;
                }
                DT *Cblk = C + ic * ldc + jc;
                if (pack_b) {
                    kr->pack_b(tb, Bblk, ldb, k, n, pb);
                    kr->macro(m, n, k, alpha, pa, pb, 0, 1, beta_k, Cblk, ldc, ep);
                } else {
                    kr->macro(m, n, k, alpha, pa, Bblk, ldb, 0, beta_k, Cblk, ldc, ep);
                }
            }
        }
    }
    return PLAST_GEMM_OK;
}

/* Split an M x N problem over p threads as a tm x tn grid of whole micro-tiles, minimising what the threads
 * pack in total (each packs its rows of A and its columns of B). Returns thread t's rectangle. */
static void DNAME(partition)(const DKERNELS *kr, int p, int t, ptrdiff_t M, ptrdiff_t N, ptrdiff_t *i0, ptrdiff_t *m,
                             ptrdiff_t *j0, ptrdiff_t *n) {
    const ptrdiff_t mt = gemm_cdiv(M, kr->mr), nt = gemm_cdiv(N, kr->nr);
    int best_tm = 1;
    double best = -1;
    for (int tm = 1; tm <= p; tm++) {
        if (p % tm) continue;
        const int tn = p / tm;
        if (tm > mt || tn > nt) continue;
        const double cost = (double)M / tm + (double)N / tn;
        if (best < 0 || cost < best) {
            best = cost;
            best_tm = tm;
        }
    }
    const int tm = best_tm, tn = p / best_tm;
    const int ti = t / tn, tj = t % tn;
    /* tiles [lo, hi) of the mt (nt) micro-rows (columns), as even as whole tiles allow */
    const ptrdiff_t ilo = mt * ti / tm, ihi = mt * (ti + 1) / tm;
    const ptrdiff_t jlo = nt * tj / tn, jhi = nt * (tj + 1) / tn;
    *i0 = ilo * kr->mr;
    *m = (ihi * kr->mr < M ? ihi * kr->mr : M) - *i0;
    *j0 = jlo * kr->nr;
    *n = (jhi * kr->nr < N ? jhi * kr->nr : N) - *j0;
    if (*m < 0) *m = 0;
    if (*n < 0) *n = 0;
}

/* Threads worth using: at least GEMM_FLOPS_PER_THREAD flops each, and a grid of whole micro-tiles. */
static int DNAME(threads_for)(const DKERNELS *kr, int nthreads, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K) {
    if (nthreads <= 1 || !PLAST_HAVE_OPENMP) return 1;
    const double flops = 2.0 * (double)M * (double)N * (double)K;
    double want = flops / GEMM_FLOPS_PER_THREAD;
    const double tiles = (double)gemm_cdiv(M, kr->mr) * (double)gemm_cdiv(N, kr->nr);
    if (want > tiles) want = tiles;
    if (want < 2) return 1;
    return want < nthreads ? (int)want : nthreads;
}

static int DNAME(gemm_impl)(const DKERNELS *kr, int nthreads, int ta, int tb, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K,
                            DT alpha, const DT *A, ptrdiff_t lda, const DT *B, ptrdiff_t ldb, DT beta, DT *C,
                            ptrdiff_t ldc, const DEP *e) {
    if (M <= 0 || N <= 0) return PLAST_GEMM_OK;
    if (K <= 0 || alpha == (DT)0) {
        kr->scale_ep(M, N, beta, C, ldc, e);
        return PLAST_GEMM_OK;
    }
    /* A few rows times a transposed B: dot products, no packing (see dot_rows in gemm_kernels.h). */
    if (M <= DOT_ROWS_MAX_M && K >= DOT_ROWS_MIN_K && tb && !ta && DNAME(threads_for)(kr, nthreads, M, N, K) <= 1) {
        kr->dot_rows(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, e);
        return PLAST_GEMM_OK;
    }
    const int nt = DNAME(threads_for)(kr, nthreads, M, N, K);
    if (nt <= 1) return DNAME(serial)(kr, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, e);
    int err = 0;
#if PLAST_HAVE_OPENMP
#pragma omp parallel num_threads(nt) reduction(| : err)
    {
        const int p = omp_get_num_threads(), t = omp_get_thread_num();
        ptrdiff_t i0, m, j0, n;
        DNAME(partition)(kr, p, t, M, N, &i0, &m, &j0, &n);
        if (m > 0 && n > 0) {
            DEP et;
            if (e) et = DNAME(ep_at)(e, i0, j0);
            err |= DNAME(serial)(kr, ta, tb, m, n, K, alpha, ta ? A + i0 : A + i0 * lda, lda,
                                 tb ? B + j0 * ldb : B + j0, ldb, beta, C + i0 * ldc + j0, ldc, e ? &et : NULL);
        }
    }
#endif
    return err ? PLAST_GEMM_ENOMEM : PLAST_GEMM_OK;
}

int DCAT(plast_gemm, DS)(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K,
                         DT alpha, const DT *A, ptrdiff_t lda, const DT *B, ptrdiff_t ldb, DT beta, DT *C,
                         ptrdiff_t ldc, const plast_gemm_epilogue *ep) {
    DEP e = {0};
    if (ep) DNAME(ep_from_public)(&e, ep);
    return DNAME(gemm_impl)(DNAME(kernels_for)(simd), nthreads, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta,
                            C, ldc, ep ? &e : NULL);
}

int DCAT(plast_gemm_batched, DS)(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t batch, ptrdiff_t M,
                                 ptrdiff_t N, ptrdiff_t K, DT alpha, const DT *A, ptrdiff_t lda, ptrdiff_t stride_a,
                                 const DT *B, ptrdiff_t ldb, ptrdiff_t stride_b, DT beta, DT *C, ptrdiff_t ldc,
                                 ptrdiff_t stride_c, const plast_gemm_epilogue *ep) {
    if (batch <= 0 || M <= 0 || N <= 0) return PLAST_GEMM_OK;
    const DKERNELS *kr = DNAME(kernels_for)(simd);
    DEP e = {0};
    if (ep) DNAME(ep_from_public)(&e, ep);
    const ptrdiff_t rstride = ep && ep->residual ? ep->residual_bstride : 0;

    /* A stack of row-major A's times one shared B is one tall product: fold the batch into M. */
    if (batch > 1 && stride_b == 0 && !trans_a && stride_a == M * lda && stride_c == M * ldc &&
        (!ep || (!ep->bias_row && (!ep->residual || rstride == M * e.ldr))))
        return DNAME(gemm_impl)(kr, nthreads, trans_a, trans_b, batch * M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                                ep ? &e : NULL);

    const double flops = 2.0 * (double)M * (double)N * (double)K;
    int nt = PLAST_HAVE_OPENMP ? nthreads : 1;
    if (nt > batch) nt = (int)batch;
    if (nt > 1 && flops * (double)batch < 2 * GEMM_FLOPS_PER_THREAD) nt = 1;
    /* Big products, or too few of them to share evenly, use all threads each, one after another. */
    const int per_product =
        nt <= 1 || (batch % nt != 0 && batch < 4 * nt && DNAME(threads_for)(kr, nthreads, M, N, K) >= nthreads);
    if (per_product) {
        for (ptrdiff_t b = 0; b < batch; b++) {
            DEP eb = e;
            if (ep && eb.res) eb.res += b * rstride;
            int err = DNAME(gemm_impl)(kr, nthreads, trans_a, trans_b, M, N, K, alpha, A + b * stride_a, lda,
                                       B + b * stride_b, ldb, beta, C + b * stride_c, ldc, ep ? &eb : NULL);
            if (err) return err;
        }
        return PLAST_GEMM_OK;
    }
    /* Many small products: one thread per product, each with its own packing buffers. */
    int err = 0;
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) reduction(| : err)
#endif
    for (ptrdiff_t b = 0; b < batch; b++) {
        DEP eb = e;
        if (ep && eb.res) eb.res += b * rstride;
        err |= DNAME(gemm_impl)(kr, 1, trans_a, trans_b, M, N, K, alpha, A + b * stride_a, lda, B + b * stride_b, ldb,
                                beta, C + b * stride_c, ldc, ep ? &eb : NULL);
    }
    return err ? PLAST_GEMM_ENOMEM : PLAST_GEMM_OK;
}

/* outer x batch products, operand (o, b) at X + o * ostride_x + b * stride_x: attention's (batch, head) views of a
 * fused qkv projection, whose two batch dims do not collapse into one stride. When the products are small enough
 * to run one per thread, all outer * batch of them share one parallel region; calling the batched entry once per
 * outer step forked and joined the threads outer times, for as few as 4 products of a few microseconds each (the
 * gpt workload's 16 x 4 heads: 1.3-1.8x torch's time at 2 threads). Otherwise, and with a residual, it is that
 * loop. */
int DCAT(plast_gemm_batched2, DS)(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t outer, ptrdiff_t batch,
                                  ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, DT alpha, const DT *A, ptrdiff_t lda,
                                  ptrdiff_t stride_a, ptrdiff_t ostride_a, const DT *B, ptrdiff_t ldb,
                                  ptrdiff_t stride_b, ptrdiff_t ostride_b, DT beta, DT *C, ptrdiff_t ldc,
                                  ptrdiff_t stride_c, ptrdiff_t ostride_c, const plast_gemm_epilogue *ep) {
    if (outer <= 0 || batch <= 0 || M <= 0 || N <= 0) return PLAST_GEMM_OK;
    const DKERNELS *kr = DNAME(kernels_for)(simd);
    const ptrdiff_t total = outer * batch;
    const double flops = 2.0 * (double)M * (double)N * (double)K;
    int nt = PLAST_HAVE_OPENMP ? nthreads : 1;
    if (nt > total) nt = (int)total;
    if (nt > 1 && flops * (double)total < 2 * GEMM_FLOPS_PER_THREAD) nt = 1;
    /* the batched entry's rule for running each product on all threads, over all the products */
    const int per_product =
        nt <= 1 || (total % nt != 0 && total < 4 * nt && DNAME(threads_for)(kr, nthreads, M, N, K) >= nthreads);
    if (outer == 1 || per_product || (ep && ep->residual)) {
        for (ptrdiff_t o = 0; o < outer; o++) {
            int err = DCAT(plast_gemm_batched, DS)(simd, nthreads, trans_a, trans_b, batch, M, N, K, alpha,
                                                   A + o * ostride_a, lda, stride_a, B + o * ostride_b, ldb, stride_b,
                                                   beta, C + o * ostride_c, ldc, stride_c, ep);
            if (err) return err;
        }
        return PLAST_GEMM_OK;
    }
    DEP e = {0};
    if (ep) DNAME(ep_from_public)(&e, ep);
    int err = 0;
#if PLAST_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) reduction(| : err)
#endif
    for (ptrdiff_t t = 0; t < total; t++) {
        const ptrdiff_t o = t / batch, b = t % batch;
        err |= DNAME(gemm_impl)(kr, 1, trans_a, trans_b, M, N, K, alpha, A + o * ostride_a + b * stride_a, lda,
                                B + o * ostride_b + b * stride_b, ldb, beta, C + o * ostride_c + b * stride_c, ldc,
                                ep ? &e : NULL);
    }
    return err ? PLAST_GEMM_ENOMEM : PLAST_GEMM_OK;
}

#undef DCAT_
#undef DCAT
#undef DNAME
#undef DEP
#undef DKERNELS
#undef DT
#undef DS
