/* Element-type-generic body of attention.c, included by attention_simd.h once per (SIMD level, dtype) with
 * the vocabulary described there. No include guard: meant to be included repeatedly.
 *
 * Every block product runs on packed, zero-padded buffers (row lengths padded to 16 elements by PAD, row
 * counts to 4), so the micro-kernel never sees a ragged edge; the caller's strides are only read while
 * packing and written while storing results.
 */

/* ---- packing ---- */

/* dst[i, j] = src[i, j] * mul for i < n, j < d, zero for d <= j < dpad; rows n..n4-1 zeroed (n4 >= n). */
static void AN(pack_rows)(T *dst, ptrdiff_t ld, const T *src, ptrdiff_t sl, ptrdiff_t sd, ptrdiff_t n, ptrdiff_t n4,
                          ptrdiff_t d, ptrdiff_t dpad, T mul) {
    for (ptrdiff_t i = 0; i < n; i++) {
        const T *s = src + i * sl;
        T *o = dst + i * ld;
        if (sd == 1)
            for (ptrdiff_t j = 0; j < d; j++) o[j] = s[j] * mul;
        else
            for (ptrdiff_t j = 0; j < d; j++) o[j] = s[j * sd] * mul;
        for (ptrdiff_t j = d; j < dpad; j++) o[j] = 0;
    }
    for (ptrdiff_t i = n; i < n4; i++) memset(dst + i * ld, 0, (size_t)dpad * sizeof(T));
}

#if defined(AT_F32) && VLEVEL >= 1
/* dst[j, i] = src[i, j] for an 8 x 8 float block (unpack, shuffle, swap 128-bit halves) */
VTARGET static inline void AN(tr8)(float *dst, ptrdiff_t ld, const float *src, ptrdiff_t sl) {
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + sl), r2 = _mm256_loadu_ps(src + 2 * sl);
    __m256 r3 = _mm256_loadu_ps(src + 3 * sl), r4 = _mm256_loadu_ps(src + 4 * sl);
    __m256 r5 = _mm256_loadu_ps(src + 5 * sl), r6 = _mm256_loadu_ps(src + 6 * sl);
    __m256 r7 = _mm256_loadu_ps(src + 7 * sl);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + ld, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

/* dst[j, i] = src[i, j] (transposed) for i < n, j < d; zero for n <= i < npad. */
VTARGET static void AN(pack_cols)(T *dst, ptrdiff_t ld, const T *src, ptrdiff_t sl, ptrdiff_t sd, ptrdiff_t n,
                                  ptrdiff_t npad, ptrdiff_t d) {
    ptrdiff_t i0 = 0;
#if defined(AT_F32) && VLEVEL >= 1
    if (sd == 1) { /* rows of src contiguous: 8 x 8 blocks in registers, the ragged edges below */
        const ptrdiff_t j0 = d / 8 * 8;
        for (i0 = 0; i0 + 8 <= n; i0 += 8)
            for (ptrdiff_t j = 0; j < j0; j += 8) AN(tr8)(dst + j * ld + i0, ld, src + i0 * sl + j, sl);
        for (ptrdiff_t j = j0; j < d; j++)
            for (ptrdiff_t i = 0; i < i0; i++) dst[j * ld + i] = src[i * sl + j];
    }
#endif
    for (ptrdiff_t j = 0; j < d; j++) {
        T *o = dst + j * ld;
        const T *s = src + j * sd;
        for (ptrdiff_t i = i0; i < n; i++) o[i] = s[i * sl];
        for (ptrdiff_t i = n; i < npad; i++) o[i] = 0;
    }
}

/* dst[i, j] = src[i, j] * mul for i < n, j < d (src packed with row stride ld, dst with any strides) */
static void AN(store_rows)(T *dst, ptrdiff_t sl, ptrdiff_t sd, const T *src, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d,
                           T mul) {
    for (ptrdiff_t i = 0; i < n; i++) {
        T *o = dst + i * sl;
        const T *a = src + i * ld;
        if (sd == 1)
            for (ptrdiff_t j = 0; j < d; j++) o[j] = a[j] * mul;
        else
            for (ptrdiff_t j = 0; j < d; j++) o[j * sd] = a[j] * mul;
    }
}

/* ---- block products ---- */

/* C[0:4, 0:nv*TW] (+)= A(0:4, 0:K) @ B[0:K, 0:nv*TW] with A(r, k) = A[r * ars + k * aks]: broadcast one
 * element of A against nv vectors of a row of B. ars/aks let the same kernel read A or A^T (dV += P^T dO). */
VTARGET PLAST_INLINE void AN(mk4)(const int nv, ptrdiff_t K, const T *A, ptrdiff_t ars, ptrdiff_t aks, const T *B,
                                  ptrdiff_t ldb, T *C, ptrdiff_t ldc, int acc) {
    TV c0[AT_NVMAX], c1[AT_NVMAX], c2[AT_NVMAX], c3[AT_NVMAX];
    for (int v = 0; v < nv; v++) {
        if (acc) {
            c0[v] = t_load(C + v * TW);
            c1[v] = t_load(C + ldc + v * TW);
            c2[v] = t_load(C + 2 * ldc + v * TW);
            c3[v] = t_load(C + 3 * ldc + v * TW);
        } else {
            c0[v] = c1[v] = c2[v] = c3[v] = t_zero();
        }
    }
    const T *a0 = A, *a1 = A + ars, *a2 = A + 2 * ars, *a3 = A + 3 * ars;
    for (ptrdiff_t k = 0; k < K; k++) {
        const T *b = B + k * ldb;
        TV bv[AT_NVMAX];
        for (int v = 0; v < nv; v++) bv[v] = t_load(b + v * TW);
        TV x0 = t_set1(a0[k * aks]), x1 = t_set1(a1[k * aks]);
        for (int v = 0; v < nv; v++) {
            c0[v] = t_fma(x0, bv[v], c0[v]);
            c1[v] = t_fma(x1, bv[v], c1[v]);
        }
        TV x2 = t_set1(a2[k * aks]), x3 = t_set1(a3[k * aks]);
        for (int v = 0; v < nv; v++) {
            c2[v] = t_fma(x2, bv[v], c2[v]);
            c3[v] = t_fma(x3, bv[v], c3[v]);
        }
    }
    for (int v = 0; v < nv; v++) {
        t_store(C + v * TW, c0[v]);
        t_store(C + ldc + v * TW, c1[v]);
        t_store(C + 2 * ldc + v * TW, c2[v]);
        t_store(C + 3 * ldc + v * TW, c3[v]);
    }
}

/* C[M, N] (+)= A(M, K) @ B[K, N]; M a multiple of 4, N of TW (the packed layouts guarantee both).
 *
 * On a causal block pair, `tri` skips what the mask hides, per tile of 4 rows (diag = i0 - j0: query row r of
 * the block sees key j when j <= r + diag): AT_TRI_N for products whose rows are queries and columns keys
 * (scores, dP: columns past the tile's last visible key are left unwritten), AT_TRI_KEND for rows of queries
 * summing over keys (P V, dS K), AT_TRI_KBEGIN for rows of keys summing over queries (P^T dO, dS^T q). */
VTARGET static void AN(mm)(ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, const T *A, ptrdiff_t ars, ptrdiff_t aks, const T *B,
                           ptrdiff_t ldb, T *C, ptrdiff_t ldc, int acc, int tri, ptrdiff_t diag) {
    for (ptrdiff_t i = 0; i < M; i += 4) {
        ptrdiff_t nvec = N / TW, k0 = 0, k1 = K;
        if (tri == AT_TRI_N) {
            ptrdiff_t lim = (i + 4 + diag + TW - 1) / TW;
            if (i + 4 + diag <= 0) continue;
            nvec = lim < nvec ? lim : nvec;
        } else if (tri == AT_TRI_KEND) {
            k1 = i + 4 + diag < K ? i + 4 + diag : K;
        } else if (tri == AT_TRI_KBEGIN) {
            k0 = i - diag > 0 ? i - diag : 0;
        }
        if (k1 <= k0) {
            if (acc) continue;
            k0 = k1 = 0;
        }
        const T *a = A + i * ars + k0 * aks, *b = B + k0 * ldb;
        T *c = C + i * ldc;
        const ptrdiff_t kk = k1 - k0;
        ptrdiff_t v = 0;
        for (; v + AT_NVMAX <= nvec; v += AT_NVMAX)
            AN(mk4)(AT_NVMAX, kk, a, ars, aks, b + v * TW, ldb, c + v * TW, ldc, acc);
        switch (nvec - v) { /* constant tile widths, so each call keeps its tile in registers */
#if AT_NVMAX > 3
        case 3: AN(mk4)(3, kk, a, ars, aks, b + v * TW, ldb, c + v * TW, ldc, acc); break;
#endif
#if AT_NVMAX > 2
        case 2: AN(mk4)(2, kk, a, ars, aks, b + v * TW, ldb, c + v * TW, ldc, acc); break;
#endif
        case 1: AN(mk4)(1, kk, a, ars, aks, b + v * TW, ldb, c + v * TW, ldc, acc); break;
        default: break;
        }
    }
}

/* ---- rows of scores ---- */

VTARGET static T AN(rowmax)(const T *s, ptrdiff_t n) {
    T m = -INFINITY;
    ptrdiff_t j = 0;
    if (n >= TW) {
        TV mv = t_load(s);
        for (j = TW; j + TW <= n; j += TW) mv = t_max(mv, t_load(s + j));
        m = t_hmax(mv);
    }
    for (; j < n; j++) m = s[j] > m ? s[j] : m;
    return m;
}

/* s[j] = exp(s[j] - m) for j < n and 0 for n <= j < npad (npad: a multiple of TW); returns the sum. */
VTARGET static T AN(exp_shift)(T *s, ptrdiff_t n, ptrdiff_t npad, T m) {
    ptrdiff_t j = 0;
#ifdef AT_VEXP
    TV mv = t_set1(m), acc = t_zero();
    for (; j + TW <= n; j += TW) {
        TV e = AT_VEXP(t_sub(t_load(s + j), mv));
        t_store(s + j, e);
        acc = t_add(acc, e);
    }
    if (j < n) { /* the last vector runs into the padding: zero those lanes, then add it whole */
        t_store(s + j, AT_VEXP(t_sub(t_load(s + j), mv)));
        for (ptrdiff_t i = n; i < j + TW; i++) s[i] = 0;
        acc = t_add(acc, t_load(s + j));
        j += TW;
    }
    T sum = t_hsum(acc);
#else
    T sum = 0;
    for (; j < n; j++) {
        T e = AT_SEXP(s[j] - m);
        s[j] = e;
        sum += e;
    }
#endif
    for (; j < npad; j++) s[j] = 0;
    return sum;
}

/* keys of block [j0, j0 + nk) that query row i sees */
static inline ptrdiff_t AN(visible)(const attn_ctx *c, ptrdiff_t i, ptrdiff_t j0, ptrdiff_t nk) {
    if (!c->causal) return nk;
    ptrdiff_t n = i + 1 - j0;
    return n < 0 ? 0 : n > nk ? nk : n;
}

/* ---- forward ---- */

/* Scratch (elements): K^T as one (D x BK) panel per key block (rows of a D x S matrix would sit a power of
 * two apart for long sequences and evict each other from L1), V (SP x DVP), a query block (BQ x DP), its
 * scores (BQ x BK), its output accumulator (BQ x DVP) and three per-row values (BQ each). */
static ptrdiff_t AN(fwd_scratch)(const attn_ctx *c) {
    return c->D * c->nkb * ATT_BK + c->SP * c->DVP + ATT_BQ * (c->DP + ATT_BK + c->DVP + 3);
}

/* The visible keys of a masked head (m: its mask bytes, ms apart), packed in order as K^T panels and V rows
 * (the layouts of the unmasked packing); returns how many. */
static ptrdiff_t AN(pack_masked)(const attn_ctx *c, T *kt, T *vp, const T *k, const T *v, const unsigned char *m,
                                 ptrdiff_t ms) {
    const ptrdiff_t D = c->D, Dv = c->Dv, DVP = c->DVP;
    ptrdiff_t n = 0;
    for (ptrdiff_t s = 0; s < c->S; s++) {
        if (!m[s * ms]) continue;
        const T *ks = k + s * c->k.sl, *vs = v + s * c->v.sl;
        T *col = kt + n / ATT_BK * ATT_BK * D + n % ATT_BK, *row = vp + n * DVP;
        for (ptrdiff_t d = 0; d < D; d++) col[d * ATT_BK] = ks[d * c->k.sd];
        for (ptrdiff_t d = 0; d < Dv; d++) row[d] = vs[d * c->v.sd];
        for (ptrdiff_t d = Dv; d < DVP; d++) row[d] = 0;
        n++;
    }
    const ptrdiff_t nk = n % ATT_BK, j0 = n - nk; /* the last panel's padding columns */
    if (nk)
        for (ptrdiff_t d = 0; d < D; d++)
            for (ptrdiff_t i = nk; i < PAD(nk); i++) kt[j0 * D + d * ATT_BK + i] = 0;
    return n;
}

/* How many keys a masked head sees when they are the leading ones (a padding mask), or -1. */
static ptrdiff_t AN(mask_prefix)(const unsigned char *m, ptrdiff_t ms, ptrdiff_t S) {
    ptrdiff_t n = 0;
    while (n < S && m[n * ms]) n++;
    for (ptrdiff_t s = n; s < S; s++)
        if (m[s * ms]) return -1;
    return n;
}

/* Query blocks part, part + nparts, ... of head bh. */
VTARGET static void AN(fwd_task)(const attn_ctx *c, ptrdiff_t bh, ptrdiff_t part, ptrdiff_t nparts, T *scratch) {
    const ptrdiff_t D = c->D, Dv = c->Dv, L = c->L, DP = c->DP, DVP = c->DVP, SP = c->SP;
    ptrdiff_t S = c->S;
    const ptrdiff_t b = bh / c->H, h = bh % c->H;
    const T *q = (const T *)c->q.p + b * c->q.sb + h * c->q.sh;
    const T *k = (const T *)c->k.p + b * c->k.sb + h * c->k.sh;
    const T *v = (const T *)c->v.p + b * c->v.sb + h * c->v.sh;
    T *out = (T *)c->out.p + b * c->out.sb + h * c->out.sh;
    T *lse = (T *)c->lse.p + b * c->lse.sb + h * c->lse.sh;
    T *kt = scratch, *vp = kt + D * c->nkb * ATT_BK, *qb = vp + SP * DVP, *sb = qb + ATT_BQ * DP;
    T *acc = sb + ATT_BQ * ATT_BK;
    T *mrow = acc + ATT_BQ * DVP, *lrow = mrow + ATT_BQ, *alpha = lrow + ATT_BQ;
    const T scale = (T)c->scale;
    const int tn = c->causal ? AT_TRI_N : 0, tkend = c->causal ? AT_TRI_KEND : 0;

    /* the keys any of this part's query blocks sees */
    ptrdiff_t last = part + (c->nqb - 1 - part) / nparts * nparts;
    ptrdiff_t smax = S;
    if (c->causal) {
        ptrdiff_t rows = (last + 1) * ATT_BQ < L ? (last + 1) * ATT_BQ : L;
        smax = rows < S ? rows : S;
    }
    int packed = 0;
    if (c->kmask.p) { /* never causal: smax == S */
        const unsigned char *m = (const unsigned char *)c->kmask.p + b * c->kmask.sb + h * c->kmask.sh;
        const ptrdiff_t n = AN(mask_prefix)(m, c->kmask.sl, S);
        if (n < 0) {
            S = smax = AN(pack_masked)(c, kt, vp, k, v, m, c->kmask.sl);
            packed = 1;
        } else {
            S = smax = n;
        }
    }
    if (!packed) {
        for (ptrdiff_t j0 = 0; j0 < smax; j0 += ATT_BK) {
            const ptrdiff_t nk = smax - j0 < ATT_BK ? smax - j0 : ATT_BK;
            AN(pack_cols)(kt + j0 * D, ATT_BK, k + j0 * c->k.sl, c->k.sl, c->k.sd, nk, PAD(nk), D);
        }
        AN(pack_rows)(vp, DVP, v, c->v.sl, c->v.sd, smax, smax, Dv, DVP, 1);
    }

    for (ptrdiff_t ib = part; ib < c->nqb; ib += nparts) {
        const ptrdiff_t i0 = ib * ATT_BQ, nq = L - i0 < ATT_BQ ? L - i0 : ATT_BQ, nq4 = PAD4(nq);
        AN(pack_rows)(qb, DP, q + i0 * c->q.sl, c->q.sl, c->q.sd, nq, nq4, D, DP, scale);
        for (ptrdiff_t r = 0; r < nq4; r++) {
            mrow[r] = -INFINITY;
            lrow[r] = 0;
        }
        memset(acc, 0, (size_t)(nq4 * DVP) * sizeof(T));
        const ptrdiff_t kend = c->causal && i0 + nq < S ? i0 + nq : S;
        for (ptrdiff_t j0 = 0; j0 < kend; j0 += ATT_BK) {
            const ptrdiff_t nk = kend - j0 < ATT_BK ? kend - j0 : ATT_BK, nkp = PAD(nk);
            AN(mm)(nq4, nkp, D, qb, DP, 1, kt + j0 * D, ATT_BK, sb, ATT_BK, 0, tn, i0 - j0);
            for (ptrdiff_t r = 0; r < nq4; r++) {
                T *s = sb + r * ATT_BK;
                ptrdiff_t nr = r < nq ? AN(visible)(c, i0 + r, j0, nk) : 0;
                if (nr == 0) { /* nothing new for this row (or a padding row) */
                    memset(s, 0, (size_t)nkp * sizeof(T));
                    alpha[r] = 1;
                    continue;
                }
                T mx = AN(rowmax)(s, nr);
                T mnew = mx > mrow[r] ? mx : mrow[r];
                alpha[r] = AT_SEXP(mrow[r] - mnew);
                lrow[r] = lrow[r] * alpha[r] + AN(exp_shift)(s, nr, nkp, mnew);
                mrow[r] = mnew;
            }
            for (ptrdiff_t r = 0; r < nq; r++) {
                if (alpha[r] == 1) continue;
                TV a = t_set1(alpha[r]);
                T *o = acc + r * DVP;
                for (ptrdiff_t d = 0; d < DVP; d += TW) t_store(o + d, t_mul(t_load(o + d), a));
            }
            AN(mm)(nq4, DVP, nk, sb, ATT_BK, 1, vp + j0 * DVP, DVP, acc, DVP, 1, tkend, i0 - j0);
        }
        for (ptrdiff_t r = 0; r < nq; r++) {
            const T l = lrow[r], inv = l > 0 ? 1 / l : 0;
            AN(store_rows)(out + (i0 + r) * c->out.sl, c->out.sl, c->out.sd, acc + r * DVP, DVP, 1, Dv, inv);
            lse[(i0 + r) * c->lse.sl] = l > 0 ? mrow[r] + AT_SLOG(l) : -INFINITY;
        }
    }
}

/* ---- backward ---- */

/* Scratch (elements): the head's scaled q (LP x DP), dout (LP x DVP), D_i (LP) and dq accumulator (LP x DP);
 * one key block's K^T (D x BK), K (BK x DP), V^T (Dv x BK), dk and dv accumulators (BK x DP, BK x DVP); the
 * block pair's P and dS (BQ x BK each). */
static ptrdiff_t AN(bwd_scratch)(const attn_ctx *c) {
    return c->LP * (2 * c->DP + c->DVP + 1) + c->D * ATT_BK + ATT_BK * c->DP + c->Dv * ATT_BK +
           ATT_BK * (c->DP + c->DVP) + 2 * ATT_BQ * ATT_BK;
}

typedef struct {
    const T *q, *k, *v, *out, *lse, *dout;
    T *dq, *dk, *dv;
    T *qp, *dop, *drow, *dqacc, *kt, *kp, *vt, *dkacc, *dvacc, *pb, *dsb;
} AN(bwd_head);

static void AN(bwd_bind)(const attn_ctx *c, ptrdiff_t bh, T *scratch, AN(bwd_head) * w) {
    const ptrdiff_t b = bh / c->H, h = bh % c->H;
    w->q = (const T *)c->q.p + b * c->q.sb + h * c->q.sh;
    w->k = (const T *)c->k.p + b * c->k.sb + h * c->k.sh;
    w->v = (const T *)c->v.p + b * c->v.sb + h * c->v.sh;
    w->out = (const T *)c->out.p + b * c->out.sb + h * c->out.sh;
    w->lse = (const T *)c->lse.p + b * c->lse.sb + h * c->lse.sh;
    w->dout = (const T *)c->dout.p + b * c->dout.sb + h * c->dout.sh;
    w->dq = (T *)c->dq.p + b * c->dq.sb + h * c->dq.sh;
    w->dk = (T *)c->dk.p + b * c->dk.sb + h * c->dk.sh;
    w->dv = (T *)c->dv.p + b * c->dv.sb + h * c->dv.sh;
    w->qp = scratch;
    w->dop = w->qp + c->LP * c->DP;
    w->drow = w->dop + c->LP * c->DVP;
    w->dqacc = w->drow + c->LP;
    w->kt = w->dqacc + c->LP * c->DP;
    w->kp = w->kt + c->D * ATT_BK;
    w->vt = w->kp + ATT_BK * c->DP;
    w->dkacc = w->vt + c->Dv * ATT_BK;
    w->dvacc = w->dkacc + ATT_BK * c->DP;
    w->pb = w->dvacc + ATT_BK * c->DVP;
    w->dsb = w->pb + ATT_BQ * ATT_BK;
}

/* Pack query rows [r0, r1) (r1 - r0 a multiple of 4 or ending at L): scaled q, dout, D_i = dout . out. */
static void AN(bwd_rows)(const attn_ctx *c, AN(bwd_head) * w, ptrdiff_t r0, ptrdiff_t r1) {
    const ptrdiff_t L = c->L, n = (r1 < L ? r1 : L) - r0, n4 = PAD4(r1 - r0);
    AN(pack_rows)(w->qp + r0 * c->DP, c->DP, w->q + r0 * c->q.sl, c->q.sl, c->q.sd, n, n4, c->D, c->DP, (T)c->scale);
    AN(pack_rows)(w->dop + r0 * c->DVP, c->DVP, w->dout + r0 * c->dout.sl, c->dout.sl, c->dout.sd, n, n4, c->Dv, c->DVP,
                  1);
    for (ptrdiff_t i = 0; i < n4; i++) {
        T s = 0;
        if (i < n) {
            const T *o = w->out + (r0 + i) * c->out.sl, *g = w->dout + (r0 + i) * c->dout.sl;
            if (c->out.sd == 1 && c->dout.sd == 1)
                for (ptrdiff_t d = 0; d < c->Dv; d++) s += o[d] * g[d];
            else
                for (ptrdiff_t d = 0; d < c->Dv; d++) s += o[d * c->out.sd] * g[d * c->dout.sd];
        }
        w->drow[r0 + i] = s;
    }
}

/* Pack key block [j0, j0 + nk) as K^T, K and V^T. */
static void AN(bwd_keys)(const attn_ctx *c, AN(bwd_head) * w, ptrdiff_t j0, ptrdiff_t nk) {
    const ptrdiff_t nkp = PAD(nk);
    AN(pack_cols)(w->kt, ATT_BK, w->k + j0 * c->k.sl, c->k.sl, c->k.sd, nk, nkp, c->D);
    AN(pack_rows)(w->kp, c->DP, w->k + j0 * c->k.sl, c->k.sl, c->k.sd, nk, nk, c->D, c->DP, 1);
    AN(pack_cols)(w->vt, ATT_BK, w->v + j0 * c->v.sl, c->v.sl, c->v.sd, nk, nkp, c->Dv);
}

/* One (query block, key block) pair: recompute P from the scores and lse, then dV += P^T dO, dP = dO V^T,
 * dS = P (dP - D_i), dQ += dS K, dK += dS^T (scale q). dq / dk+dv are skipped when not wanted. */
VTARGET static void AN(bwd_pair)(const attn_ctx *c, AN(bwd_head) * w, ptrdiff_t i0, ptrdiff_t nq, ptrdiff_t j0,
                                 ptrdiff_t nk, int want_q, int want_kv) {
    const ptrdiff_t DP = c->DP, DVP = c->DVP, nq4 = PAD4(nq), nkp = PAD(nk), diag = i0 - j0;
    const int tn = c->causal ? AT_TRI_N : 0, tkend = c->causal ? AT_TRI_KEND : 0;
    const int tkbegin = c->causal ? AT_TRI_KBEGIN : 0;
    T *pb = w->pb, *dsb = w->dsb;
    AN(mm)(nq4, nkp, c->D, w->qp + i0 * DP, DP, 1, w->kt, ATT_BK, pb, ATT_BK, 0, tn, diag);
    for (ptrdiff_t r = 0; r < nq4; r++) {
        T *s = pb + r * ATT_BK;
        ptrdiff_t nr = r < nq ? AN(visible)(c, i0 + r, j0, nk) : 0;
        if (nr == 0) memset(s, 0, (size_t)nkp * sizeof(T));
        else AN(exp_shift)(s, nr, nkp, w->lse[(i0 + r) * c->lse.sl]);
    }
    if (want_kv) AN(mm)(nkp, DVP, nq, pb, 1, ATT_BK, w->dop + i0 * DVP, DVP, w->dvacc, DVP, 1, tkbegin, diag);
    AN(mm)(nq4, nkp, c->Dv, w->dop + i0 * DVP, DVP, 1, w->vt, ATT_BK, dsb, ATT_BK, 0, tn, diag);
    for (ptrdiff_t r = 0; r < nq4; r++) {
        /* dS = P (dP - D_i) where the row sees keys; zeros elsewhere (dP was not computed there) */
        const ptrdiff_t nr = r < nq ? AN(visible)(c, i0 + r, j0, nk) : 0, w1 = (nr + TW - 1) / TW * TW;
        TV di = t_set1(w->drow[i0 + r]);
        T *p = pb + r * ATT_BK, *ds = dsb + r * ATT_BK;
        for (ptrdiff_t j = 0; j < w1; j += TW) t_store(ds + j, t_mul(t_load(p + j), t_sub(t_load(ds + j), di)));
        if (w1 < nkp) memset(ds + w1, 0, (size_t)(nkp - w1) * sizeof(T));
    }
    if (want_q) AN(mm)(nq4, DP, nk, dsb, ATT_BK, 1, w->kp, DP, w->dqacc + i0 * DP, DP, 1, tkend, diag);
    if (want_kv) AN(mm)(nkp, DP, nq, dsb, 1, ATT_BK, w->qp + i0 * DP, DP, w->dkacc, DP, 1, tkbegin, diag);
}

/* dk, dv of key block [j0, j0 + nk) from the accumulators */
static void AN(bwd_store_kv)(const attn_ctx *c, AN(bwd_head) * w, ptrdiff_t j0, ptrdiff_t nk) {
    AN(store_rows)(w->dk + j0 * c->dk.sl, c->dk.sl, c->dk.sd, w->dkacc, c->DP, nk, c->D, 1);
    AN(store_rows)(w->dv + j0 * c->dv.sl, c->dv.sl, c->dv.sd, w->dvacc, c->DVP, nk, c->Dv, 1);
}

/* dq of query rows [r0, r1) (scale applied here: the accumulator holds dS K) */
static void AN(bwd_store_q)(const attn_ctx *c, AN(bwd_head) * w, ptrdiff_t r0, ptrdiff_t r1) {
    AN(store_rows)(w->dq + r0 * c->dq.sl, c->dq.sl, c->dq.sd, w->dqacc + r0 * c->DP, c->DP, r1 - r0, c->D, (T)c->scale);
}

/* Key block jb of a head: its dk and dv, and (want_q) its share of dq, over the query blocks that see it. */
VTARGET static void AN(bwd_key_block)(const attn_ctx *c, AN(bwd_head) * w, ptrdiff_t jb, int want_q) {
    const ptrdiff_t j0 = jb * ATT_BK, nk = c->S - j0 < ATT_BK ? c->S - j0 : ATT_BK;
    AN(bwd_keys)(c, w, j0, nk);
    memset(w->dkacc, 0, (size_t)(PAD(nk) * c->DP) * sizeof(T));
    memset(w->dvacc, 0, (size_t)(PAD(nk) * c->DVP) * sizeof(T));
    for (ptrdiff_t ib = c->causal ? j0 / ATT_BQ : 0; ib < c->nqb; ib++) {
        const ptrdiff_t i0 = ib * ATT_BQ, nq = c->L - i0 < ATT_BQ ? c->L - i0 : ATT_BQ;
        AN(bwd_pair)(c, w, i0, nq, j0, nk, want_q, 1);
    }
    AN(bwd_store_kv)(c, w, j0, nk);
}

/* A whole head: dq, dk, dv. */
VTARGET static void AN(bwd_head_task)(const attn_ctx *c, ptrdiff_t bh, T *scratch) {
    AN(bwd_head) w;
    AN(bwd_bind)(c, bh, scratch, &w);
    AN(bwd_rows)(c, &w, 0, c->L);
    memset(w.dqacc, 0, (size_t)(c->LP * c->DP) * sizeof(T));
    for (ptrdiff_t jb = 0; jb < c->nkb; jb++) AN(bwd_key_block)(c, &w, jb, 1);
    AN(bwd_store_q)(c, &w, 0, c->L);
}

/* Split backward, first pass: dk and dv of key block jb of head bh. */
VTARGET static void AN(bwd_kv_task)(const attn_ctx *c, ptrdiff_t bh, ptrdiff_t jb, T *scratch) {
    AN(bwd_head) w;
    AN(bwd_bind)(c, bh, scratch, &w);
    ptrdiff_t r0 = c->causal ? jb * ATT_BK / ATT_BQ * ATT_BQ : 0;
    if (r0 < c->L) AN(bwd_rows)(c, &w, r0, c->L);
    AN(bwd_key_block)(c, &w, jb, 0);
}

/* Split backward, second pass: dq of query block ib of head bh. */
VTARGET static void AN(bwd_q_task)(const attn_ctx *c, ptrdiff_t bh, ptrdiff_t ib, T *scratch) {
    AN(bwd_head) w;
    AN(bwd_bind)(c, bh, scratch, &w);
    const ptrdiff_t i0 = ib * ATT_BQ, nq = c->L - i0 < ATT_BQ ? c->L - i0 : ATT_BQ;
    AN(bwd_rows)(c, &w, i0, i0 + nq);
    memset(w.dqacc + i0 * c->DP, 0, (size_t)(PAD4(nq) * c->DP) * sizeof(T));
    const ptrdiff_t kend = c->causal && i0 + nq < c->S ? i0 + nq : c->S;
    for (ptrdiff_t j0 = 0; j0 < kend; j0 += ATT_BK) {
        const ptrdiff_t nk = c->S - j0 < ATT_BK ? c->S - j0 : ATT_BK;
        AN(bwd_keys)(c, &w, j0, nk);
        AN(bwd_pair)(c, &w, i0, nq, j0, nk, 1, 0);
    }
    AN(bwd_store_q)(c, &w, i0, i0 + nq);
}
