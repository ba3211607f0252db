/* GEMM kernel set template: packing, micro-kernels, macro-kernel and epilogue for one element type and one ISA.
 *
 * Included once per (type, ISA) by gemm_scalar.c, gemm_avx2.c and gemm_avx512.c after defining:
 *
 *   GT, GS           element type and its short name (float, f32)
 *   GSFX             suffix for this instantiation's names (f32_avx512)
 *   GTARGET          function attribute selecting the ISA (may be empty)
 *   GV, GVL          vector type and its number of lanes
 *   GMR, GMR_LIST(X) micro-tile rows and X(1) X(2) ... X(GMR)
 *   GKC, GNB, GMB    cache blocking (depth, packed-B columns, packed-A rows)
 *   GUNROLL          k-loop unroll (1, 2 or 4): what keeps the compiler's register allocation spill-free
 *   GMASK, G_MASK(n) lane mask type; mask of the first n lanes (1 <= n <= GVL)
 *   G_ZERO() G_SET1(x) G_LOAD(p) G_STORE(p, v) G_LOADM(p, m) (masked-off lanes read as 0) G_STOREM(p, m, v)
 *   G_ADD G_MUL G_FMA(a, b, c) (= a*b + c) G_RELU(x) (NaN-preserving max(x, 0))
 *   GVEC_ACT         1 when vector GELU is available: then also G_SUB G_DIV G_MIN G_MAX G_ABS G_ROUND
 *                    G_LDEXP(y, n) (y * 2^n for integral-valued n) G_SELNEG(x, a, b) (x < 0 ? a : b)
 *   G_IS_F32         1 for float, 0 for double
 *   G_TRANSPOSE      packing transposes in registers: 0 none, 1 SSE (4x4 float, 2x2 double), 2 also AVX (8x8 float,
 *                    4x4 double); x86 only, stays defined
 *
 * The micro-tile is GMR rows by GNR = 2 * GVL columns: each of the GMR x 2 accumulators is one vector register.
 * For every k the kernel loads one row of the packed B micro-panel (2 vectors) and broadcasts GMR elements of
 * the packed A micro-panel. The A micro-panel (GMR x kc) stays in L1 while the inner loop walks the B
 * micro-panels of the packed B block, which stays in L2.
 */

#define GCAT_(a, b) a##_##b
#define GCAT(a, b)  GCAT_(a, b)
#define GNAME(x)    GCAT(x, GSFX)
#define GEP         GCAT(gemm_ep, GS)
#define GKERNELS    GCAT(gemm_kernels, GS)
#define GNR         (2 * GVL)

#ifndef PLAST_GEMM_MIN
#define PLAST_GEMM_MIN(a, b) ((a) < (b) ? (a) : (b))
#endif

/* ---------------------------------------------------------------------------------------------------------- */
/* Micro-kernel. mr (1..GMR), nv (1..2 vectors) and bmask (the last B vector is partial and B is not padded, so
 * it must be loaded under a mask) are compile-time constants in every instantiation below, so the accumulator
 * arrays live in registers and the loops unroll completely. */

GTARGET PLAST_INLINE void GNAME(ukr_body)(const int mr, const int nv, const int bmask, ptrdiff_t kc,
                                          const GT *restrict pa, const GT *restrict pb, ptrdiff_t rs_b, GMASK mlast,
                                          int cpartial, GT alpha, GT beta, GT *restrict C, ptrdiff_t ldc) {
    GV acc[GMR][2];
#pragma GCC unroll 16
    for (int i = 0; i < GMR; i++) {
        acc[i][0] = G_ZERO();
        acc[i][1] = G_ZERO();
    }
    /* Start fetching the C tile now; it is read (beta != 0, later k blocks) or written after the k loop. */
#pragma GCC unroll 16
    for (int i = 0; i < GMR; i++) {
        if (i < mr) {
            __builtin_prefetch(C + i * ldc, 1, 3);
            __builtin_prefetch(C + i * ldc + nv * GVL - 1, 1, 3);
        }
    }

#define GUKR_STEP(P, Q)                                                                                                \
    do {                                                                                                               \
        GV b0, b1 = G_ZERO();                                                                                          \
        if (nv == 1) b0 = bmask ? G_LOADM((Q), mlast) : G_LOAD(Q);                                                     \
        else {                                                                                                         \
            b0 = G_LOAD(Q);                                                                                            \
            b1 = bmask ? G_LOADM((Q) + GVL, mlast) : G_LOAD((Q) + GVL);                                                \
        }                                                                                                              \
        _Pragma("GCC unroll 16") for (int i = 0; i < GMR; i++) {                                                       \
            if (i < mr) {                                                                                              \
                GV a = G_SET1((P)[i]);                                                                                 \
                acc[i][0] = G_FMA(a, b0, acc[i][0]);                                                                   \
                if (nv == 2) acc[i][1] = G_FMA(a, b1, acc[i][1]);                                                      \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

    ptrdiff_t k = 0;
    /* Only full-height tiles are hot enough to be worth the unrolled code. */
#if GUNROLL >= 4
    if (mr == GMR) {
        for (; k + 4 <= kc; k += 4) {
            GUKR_STEP(pa, pb);
            GUKR_STEP(pa + GMR, pb + rs_b);
            GUKR_STEP(pa + 2 * GMR, pb + 2 * rs_b);
            GUKR_STEP(pa + 3 * GMR, pb + 3 * rs_b);
            pa += 4 * GMR;
            pb += 4 * rs_b;
        }
    }
#elif GUNROLL >= 2
    if (mr == GMR) {
        for (; k + 2 <= kc; k += 2) {
            GUKR_STEP(pa, pb);
            GUKR_STEP(pa + GMR, pb + rs_b);
            pa += 2 * GMR;
            pb += 2 * rs_b;
        }
    }
#endif
    for (; k < kc; k++) {
        GUKR_STEP(pa, pb);
        pa += GMR;
        pb += rs_b;
    }
#undef GUKR_STEP

    const GV va = G_SET1(alpha);
    const GV vb = G_SET1(beta);
#pragma GCC unroll 16
    for (int i = 0; i < GMR; i++) {
        if (i >= mr) break;
        GT *c = C + i * ldc;
        if (nv == 2) {
            GV x = G_MUL(va, acc[i][0]);
            if (beta != (GT)0) x = G_FMA(vb, G_LOAD(c), x);
            G_STORE(c, x);
        }
        GT *cl = c + (nv - 1) * GVL;
        GV y = G_MUL(va, acc[i][nv - 1]);
        if (cpartial) {
            if (beta != (GT)0) y = G_FMA(vb, G_LOADM(cl, mlast), y);
            G_STOREM(cl, mlast, y);
        } else {
            if (beta != (GT)0) y = G_FMA(vb, G_LOAD(cl), y);
            G_STORE(cl, y);
        }
    }
}

typedef void (*GNAME(ukr_fn))(ptrdiff_t, const GT *, const GT *, ptrdiff_t, GMASK, int, GT, GT, GT *, ptrdiff_t);

#define GUKR_DEF1(M, NV, BM)                                                                                           \
    GTARGET static void GNAME(ukr_##M##_##NV##_##BM)(ptrdiff_t kc, const GT *pa, const GT *pb, ptrdiff_t rs_b,         \
                                                     GMASK mlast, int cpartial, GT alpha, GT beta, GT *C,              \
                                                     ptrdiff_t ldc) {                                                  \
        GNAME(ukr_body)(M, NV, BM, kc, pa, pb, rs_b, mlast, cpartial, alpha, beta, C, ldc);                            \
    }
#define GUKR_DEF(M) GUKR_DEF1(M, 1, 0) GUKR_DEF1(M, 1, 1) GUKR_DEF1(M, 2, 0) GUKR_DEF1(M, 2, 1)
GMR_LIST(GUKR_DEF)
#undef GUKR_DEF
#undef GUKR_DEF1

#define GUKR_ENTRY(M)                                                                                                  \
    [M] = {{0, 0}, {GNAME(ukr_##M##_1_0), GNAME(ukr_##M##_1_1)}, {GNAME(ukr_##M##_2_0), GNAME(ukr_##M##_2_1)}},
static const GNAME(ukr_fn) GNAME(ukr_tab)[GMR + 1][3][2] = {GMR_LIST(GUKR_ENTRY)};
#undef GUKR_ENTRY

/* ---------------------------------------------------------------------------------------------------------- */
/* Activations and the epilogue. */

#include "gemm_act.h"

/* Epilogue on an m x n tile whose origin is (i0, j0) in the block the ep pointers refer to. C already holds
 * alpha * AB + beta * C. */
GTARGET static void GNAME(ep_tile)(ptrdiff_t m, ptrdiff_t n, GT *C, ptrdiff_t ldc, const GEP *ep, ptrdiff_t i0,
                                   ptrdiff_t j0) {
    const GT *bc = ep->bias_col ? ep->bias_col + j0 : NULL;
    const int act = ep->act;
    for (ptrdiff_t i = 0; i < m; i++) {
        GT *c = C + i * ldc;
        const GT br = ep->bias_row ? ep->bias_row[i0 + i] : (GT)0;
        const GT *r = ep->res ? ep->res + (i0 + i) * ep->ldr + j0 : NULL;
#if GVEC_ACT
        const GV vbr = G_SET1(br);
        for (ptrdiff_t j = 0; j < n; j += GVL) {
            const ptrdiff_t w = PLAST_GEMM_MIN((ptrdiff_t)GVL, n - j);
            const GMASK msk = G_MASK((int)w);
            const int full = w == GVL;
            GV x = full ? G_LOAD(c + j) : G_LOADM(c + j, msk);
            if (bc) x = G_ADD(x, full ? G_LOAD(bc + j) : G_LOADM(bc + j, msk));
            x = G_ADD(x, vbr);
            x = GNAME(vact)(x, act);
            if (r) x = G_ADD(x, full ? G_LOAD(r + j) : G_LOADM(r + j, msk));
            if (full) G_STORE(c + j, x);
            else G_STOREM(c + j, msk, x);
        }
#else
        for (ptrdiff_t j = 0; j < n; j++) {
            GT x = c[j] + br;
            if (bc) x += bc[j];
            x = GNAME(act1)(x, act);
            if (r) x += r[j];
            c[j] = x;
        }
#endif
    }
}

/* ---------------------------------------------------------------------------------------------------------- */
/* Packing. */

/* dst[kk*ds + i] = src[kk*ss + i] for i < m, 0 for m <= i < ds (ds <= GNR). */
GTARGET static void GNAME(pack_copy)(const GT *restrict src, ptrdiff_t ss, ptrdiff_t m, ptrdiff_t k, GT *restrict dst,
                                     const int ds) {
    if (m == ds && ds == GNR) {
        for (ptrdiff_t kk = 0; kk < k; kk++) {
            GV x0 = G_LOAD(src + kk * ss), x1 = G_LOAD(src + kk * ss + GVL);
            G_STORE(dst + kk * ds, x0);
            G_STORE(dst + kk * ds + GVL, x1);
        }
        return;
    }
    for (int v = 0; v < ds; v += GVL) {
        const ptrdiff_t nsrc = m - v < 0 ? 0 : PLAST_GEMM_MIN((ptrdiff_t)GVL, m - v);
        const int ndst = PLAST_GEMM_MIN(GVL, ds - v);
        const GMASK ms = G_MASK(nsrc > 0 ? (int)nsrc : 1), md = G_MASK(ndst);
        for (ptrdiff_t kk = 0; kk < k; kk++) {
            GV x = nsrc == GVL ? G_LOAD(src + kk * ss + v) : nsrc > 0 ? G_LOADM(src + kk * ss + v, ms) : G_ZERO();
            if (ndst == GVL) G_STORE(dst + kk * ds + v, x);
            else G_STOREM(dst + kk * ds + v, md, x);
        }
    }
}

/* Square transposes d[q*ds + j] = s[j*ss + q] of TB x TB blocks, the largest the ISA does in registers. */
#if G_TRANSPOSE && G_IS_F32
GTARGET PLAST_INLINE void GNAME(tr4)(const float *s, ptrdiff_t ss, float *d, ptrdiff_t ds) {
    __m128 r0 = _mm_loadu_ps(s), r1 = _mm_loadu_ps(s + ss);
    __m128 r2 = _mm_loadu_ps(s + 2 * ss), r3 = _mm_loadu_ps(s + 3 * ss);
    __m128 t0 = _mm_unpacklo_ps(r0, r1), t1 = _mm_unpacklo_ps(r2, r3);
    __m128 t2 = _mm_unpackhi_ps(r0, r1), t3 = _mm_unpackhi_ps(r2, r3);
    _mm_storeu_ps(d, _mm_movelh_ps(t0, t1));
    _mm_storeu_ps(d + ds, _mm_movehl_ps(t1, t0));
    _mm_storeu_ps(d + 2 * ds, _mm_movelh_ps(t2, t3));
    _mm_storeu_ps(d + 3 * ds, _mm_movehl_ps(t3, t2));
}
#if G_TRANSPOSE >= 2
#define GTB 8
GTARGET PLAST_INLINE void GNAME(trbig)(const float *s, ptrdiff_t ss, float *d, ptrdiff_t ds) {
    __m256 r[8], t[8], u[8];
#pragma GCC unroll 8
    for (int q = 0; q < 8; q++) r[q] = _mm256_loadu_ps(s + q * ss);
#pragma GCC unroll 4
    for (int q = 0; q < 8; q += 2) {
        t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]);
        t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);
    }
#pragma GCC unroll 2
    for (int q = 0; q < 8; q += 4) {
        u[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);
        u[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xEE);
        u[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);
        u[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        _mm256_storeu_ps(d + q * ds, _mm256_permute2f128_ps(u[q], u[q + 4], 0x20));
        _mm256_storeu_ps(d + (q + 4) * ds, _mm256_permute2f128_ps(u[q], u[q + 4], 0x31));
    }
}
#else
#define GTB         4
#define GNAME_trbig GNAME(tr4)
#endif
#define GTS      4 /* the smaller block */
#define GTRSMALL GNAME(tr4)
#elif G_TRANSPOSE
GTARGET PLAST_INLINE void GNAME(tr2)(const double *s, ptrdiff_t ss, double *d, ptrdiff_t ds) {
    __m128d r0 = _mm_loadu_pd(s), r1 = _mm_loadu_pd(s + ss);
    _mm_storeu_pd(d, _mm_unpacklo_pd(r0, r1));
    _mm_storeu_pd(d + ds, _mm_unpackhi_pd(r0, r1));
}
#if G_TRANSPOSE >= 2
#define GTB 4
GTARGET PLAST_INLINE void GNAME(trbig)(const double *s, ptrdiff_t ss, double *d, ptrdiff_t ds) {
    __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + ss);
    __m256d r2 = _mm256_loadu_pd(s + 2 * ss), r3 = _mm256_loadu_pd(s + 3 * ss);
    __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd(d + ds, _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd(d + 2 * ds, _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd(d + 3 * ds, _mm256_permute2f128_pd(t1, t3, 0x31));
}
#else
#define GTB         2
#define GNAME_trbig GNAME(tr2)
#endif
#define GTS      2
#define GTRSMALL GNAME(tr2)
#endif
#if G_TRANSPOSE && !defined(GNAME_trbig)
#define GNAME_trbig GNAME(trbig)
#endif

/* dst[kk*ds + i] = src[i*ss + kk] for i < m, 0 for m <= i < ds: a transposing pack. The k loop is outside, so
 * each group of GTB destination rows is finished while it is in L1 and the m source rows stream in order. */
GTARGET static void GNAME(pack_trans)(const GT *restrict src, ptrdiff_t ss, ptrdiff_t m, ptrdiff_t k, GT *restrict dst,
                                      const int ds) {
    ptrdiff_t kk = 0;
#if G_TRANSPOSE
    for (; kk + GTB <= k; kk += GTB) {
        ptrdiff_t i = 0;
        for (; i + GTB <= m; i += GTB) GNAME_trbig(src + i * ss + kk, ss, dst + kk * ds + i, ds);
        for (; i + GTS <= m; i += GTS)
            for (int q = 0; q < GTB; q += GTS) GTRSMALL(src + i * ss + kk + q, ss, dst + (kk + q) * ds + i, ds);
        for (; i < m; i++)
            for (int q = 0; q < GTB; q++) dst[(kk + q) * ds + i] = src[i * ss + kk + q];
        for (int q = 0; q < GTB; q++)
            for (ptrdiff_t z = m; z < ds; z++) dst[(kk + q) * ds + z] = (GT)0;
    }
#endif
    for (; kk < k; kk++) {
        for (ptrdiff_t i = 0; i < m; i++) dst[kk * ds + i] = src[i * ss + kk];
        for (ptrdiff_t z = m; z < ds; z++) dst[kk * ds + z] = (GT)0;
    }
}
#undef GTB
#undef GTS
#undef GTRSMALL
#undef GNAME_trbig

#if G_TRANSPOSE >= 2 && G_IS_F32 && GMR == 6
#define G_PACK_TRANS6 1
/* A full A micro-panel of AVX2's 6-row float tile from a row-major A: dst[kk*6 + i] = src[i*ss + kk], i < 6.
 * pack_trans moves 2 of the 6 rows element by element (its register transposes are 8 or 4 rows tall), which was
 * 10-15% of the time of a product with N = 128 (the gpt workload's dY @ W, x @ W^T). Here each 6 x 8 block is
 * transposed in registers as an 8 x 8 one whose rows 6 and 7 are don't-cares, and every kk's 6 values are stored
 * as a whole 8-float vector: its 2 spare lanes land on the next kk's first 2 slots, which the next store (kk
 * ascending) overwrites. Only the panel's last kk would spill past the panel: it stores exactly 6 floats. */
GTARGET static void GNAME(pack_trans6)(const float *restrict src, ptrdiff_t ss, ptrdiff_t k, float *restrict dst) {
    ptrdiff_t kk = 0;
    for (; kk + 8 <= k; kk += 8) {
        const float *s = src + kk;
        const __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ss);
        const __m256 r2 = _mm256_loadu_ps(s + 2 * ss), r3 = _mm256_loadu_ps(s + 3 * ss);
        const __m256 r4 = _mm256_loadu_ps(s + 4 * ss), r5 = _mm256_loadu_ps(s + 5 * ss);
        /* per 128-bit half: t0 = r0[0] r1[0] r0[1] r1[1], t1 = r0[2] r1[2] r0[3] r1[3], ... */
        const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
        const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
        const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
        /* u[c]: rows 0-3 of columns c (low half) and c + 4 (high half); v[c]: rows 4 and 5 in lanes 0-1 of each */
        const __m256 u[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                             _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
        const __m256 v[4] = {t4, _mm256_shuffle_ps(t4, t4, 0xEE), t5, _mm256_shuffle_ps(t5, t5, 0xEE)};
        float *d = dst + kk * 6;
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) _mm256_storeu_ps(d + c * 6, _mm256_permute2f128_ps(u[c], v[c], 0x20));
#pragma GCC unroll 3
        for (int c = 0; c < 3; c++) _mm256_storeu_ps(d + (c + 4) * 6, _mm256_permute2f128_ps(u[c], v[c], 0x31));
        const __m256 last = _mm256_permute2f128_ps(u[3], v[3], 0x31);
        if (kk + 8 < k) {
            _mm256_storeu_ps(d + 42, last);
        } else {
            _mm_storeu_ps(d + 42, _mm256_castps256_ps128(last));
            _mm_storel_pi((__m64 *)(d + 46), _mm256_extractf128_ps(last, 1));
        }
    }
    for (; kk < k; kk++)
        for (int i = 0; i < 6; i++) dst[kk * 6 + i] = src[i * ss + kk];
}
#endif

#if G_TRANSPOSE >= 2 && GMR == 6
#define G_PACK_A_ROWS 1
/* dst[kk*6 + i] = src[kk*ss + i] for i < m, 0 for m <= i < 6: an A micro-panel of AVX2's 6-row tile from a
 * transposed A (the weight gradient's dY^T, attention's P^T), whose 6 values for one kk are contiguous. pack_copy
 * would move them with a masked store, as 6 is not a whole number of vectors, and a masked store costs AMD Zen 3
 * several times a plain one: it made this pack half of a small transposed-A product's time. Two plain loads and
 * stores per kk instead (written out: left to itself, GCC vectorises the copy across kk with scalar gathers). */
GTARGET static void GNAME(pack_a_rows)(const GT *restrict src, ptrdiff_t ss, ptrdiff_t m, ptrdiff_t k,
                                       GT *restrict dst) {
    if (m == 6) {
        for (ptrdiff_t kk = 0; kk < k; kk++) {
            const GT *s = src + kk * ss;
            GT *d = dst + kk * 6;
#if G_IS_F32
            _mm_storeu_ps(d, _mm_loadu_ps(s));
            _mm_store_sd((double *)(void *)(d + 4), _mm_load_sd((const double *)(const void *)(s + 4)));
#else
            _mm256_storeu_pd(d, _mm256_loadu_pd(s));
            _mm_storeu_pd(d + 4, _mm_loadu_pd(s + 4));
#endif
        }
        return;
    }
    for (ptrdiff_t kk = 0; kk < k; kk++)
        for (int q = 0; q < 6; q++) dst[kk * 6 + q] = q < m ? src[kk * ss + q] : (GT)0;
}
#endif

GTARGET static void GNAME(pack_a)(int trans_a, const GT *A, ptrdiff_t lda, ptrdiff_t m, ptrdiff_t k, GT *pa) {
    for (ptrdiff_t i = 0; i < m; i += GMR) {
        const ptrdiff_t mr = PLAST_GEMM_MIN((ptrdiff_t)GMR, m - i);
#ifdef G_PACK_A_ROWS
        if (trans_a) GNAME(pack_a_rows)(A + i, lda, mr, k, pa + i * k);
#else
        if (trans_a) GNAME(pack_copy)(A + i, lda, mr, k, pa + i * k, GMR);
#endif
#ifdef G_PACK_TRANS6
        else if (mr == 6) GNAME(pack_trans6)(A + i * lda, lda, k, pa + i * k);
#endif
        else GNAME(pack_trans)(A + i * lda, lda, mr, k, pa + i * k, GMR);
    }
}
#undef G_PACK_TRANS6
#undef G_PACK_A_ROWS

GTARGET static void GNAME(pack_b)(int trans_b, const GT *B, ptrdiff_t ldb, ptrdiff_t k, ptrdiff_t n, GT *pb) {
    for (ptrdiff_t j = 0; j < n; j += GNR) {
        const ptrdiff_t nr = PLAST_GEMM_MIN((ptrdiff_t)GNR, n - j);
        if (trans_b) GNAME(pack_trans)(B + j * ldb, ldb, nr, k, pb + j * k, GNR);
        else GNAME(pack_copy)(B + j, ldb, nr, k, pb + j * k, GNR);
    }
}

/* ---------------------------------------------------------------------------------------------------------- */
/* Macro-kernel: all micro-tiles of an m x n block. The A micro-panel is the outer loop so it stays in L1. */

GTARGET static void GNAME(macro)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, GT alpha, const GT *pa, const GT *b,
                                 ptrdiff_t ldb, int b_packed, GT beta, GT *C, ptrdiff_t ldc, const GEP *ep) {
    const ptrdiff_t rs_b = b_packed ? GNR : ldb;
    for (ptrdiff_t i = 0; i < m; i += GMR) {
        const int mr = (int)PLAST_GEMM_MIN((ptrdiff_t)GMR, m - i);
        const GT *pa_i = pa + i * k;
        for (ptrdiff_t j = 0; j < n; j += GNR) {
            const int nr = (int)PLAST_GEMM_MIN((ptrdiff_t)GNR, n - j);
            const int nv = (nr + GVL - 1) / GVL;
            const int last = nr - (nv - 1) * GVL;
            const int cpartial = last < GVL;
            const GT *pb_j = b_packed ? b + j * k : b + j;
            GT *c = C + i * ldc + j;
            GNAME(ukr_tab)
            [mr][nv][!b_packed && cpartial](k, pa_i, pb_j, rs_b, G_MASK(last), cpartial, alpha, beta, c, ldc);
            if (ep) GNAME(ep_tile)(mr, nr, c, ldc, ep, i, j);
        }
    }
}

/* C = beta * C (C not read when beta == 0), then the epilogue: the whole product when K == 0 or alpha == 0. */
GTARGET static void GNAME(scale_ep)(ptrdiff_t m, ptrdiff_t n, GT beta, GT *C, ptrdiff_t ldc, const GEP *ep) {
    for (ptrdiff_t i = 0; i < m; i++) {
        GT *c = C + i * ldc;
        if (beta == (GT)0)
            for (ptrdiff_t j = 0; j < n; j++) c[j] = (GT)0;
        else if (beta != (GT)1)
            for (ptrdiff_t j = 0; j < n; j++) c[j] *= beta;
    }
    if (ep) GNAME(ep_tile)(m, n, C, ldc, ep, 0, 0);
}

/* Few rows times a transposed B (B stored [n, k]: a Linear layer's weight): dot products along k of rows of A
 * and rows of B, which are both contiguous, so nothing is packed. Decoding one token multiplies a single row by
 * every weight matrix; packing B there would copy the whole weight on every call. Four rows of B share each load
 * of A; the lanes are summed once per dot product. A is row-major [m, k] (not transposed). */
GTARGET static void GNAME(dot_rows)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, GT alpha, const GT *A, ptrdiff_t lda,
                                    const GT *B, ptrdiff_t ldb, GT beta, GT *C, ptrdiff_t ldc, const GEP *ep) {
    GT lanes[GVL];
    for (ptrdiff_t i = 0; i < m; i++) {
        const GT *a = A + i * lda;
        GT *c = C + i * ldc;
        for (ptrdiff_t j = 0; j < n; j += 4) {
            const int nj = (int)PLAST_GEMM_MIN((ptrdiff_t)4, n - j);
            const GT *b0 = B + j * ldb;
            const GT *b1 = nj > 1 ? b0 + ldb : b0;
            const GT *b2 = nj > 2 ? b0 + 2 * ldb : b0;
            const GT *b3 = nj > 3 ? b0 + 3 * ldb : b0;
            GV s0 = G_ZERO(), s1 = G_ZERO(), s2 = G_ZERO(), s3 = G_ZERO();
            ptrdiff_t kk = 0;
            for (; kk + GVL <= k; kk += GVL) {
                const GV va = G_LOAD(a + kk);
                s0 = G_FMA(va, G_LOAD(b0 + kk), s0);
                s1 = G_FMA(va, G_LOAD(b1 + kk), s1);
                s2 = G_FMA(va, G_LOAD(b2 + kk), s2);
                s3 = G_FMA(va, G_LOAD(b3 + kk), s3);
            }
            GT d[4];
            const GV sv[4] = {s0, s1, s2, s3};
            const GT *bq[4] = {b0, b1, b2, b3};
            for (int q = 0; q < nj; q++) {
                /* a tree over the lanes: log2(GVL) dependent adds, not GVL */
                G_STORE(lanes, sv[q]);
                for (int w = GVL / 2; w >= 1; w /= 2)
                    for (int l = 0; l < w; l++) lanes[l] += lanes[l + w];
                GT t = lanes[0];
                for (ptrdiff_t r = kk; r < k; r++) t += a[r] * bq[q][r];
                d[q] = t;
            }
            for (int q = 0; q < nj; q++) c[j + q] = alpha * d[q] + (beta == (GT)0 ? (GT)0 : beta * c[j + q]);
        }
    }
    if (ep) GNAME(ep_tile)(m, n, C, ldc, ep, 0, 0);
}

const GKERNELS GCAT(plast_gemm_kernels, GSFX) = {
    GMR, GNR, GKC, GNB, GMB, GNAME(pack_a), GNAME(pack_b), GNAME(macro), GNAME(scale_ep), GNAME(dot_rows),
};

#undef GNAME
#undef GEP
#undef GKERNELS
#undef GNR
/* The instantiation's parameters, so the next one can define its own. */
#undef GT
#undef GS
#undef GSFX
#undef GTARGET
#undef GV
#undef GVL
#undef GMR
#undef GMR_LIST
#undef GKC
#undef GNB
#undef GMB
#undef GUNROLL
#undef GMASK
#undef G_MASK
#undef G_ZERO
#undef G_SET1
#undef G_LOAD
#undef G_STORE
#undef G_LOADM
#undef G_STOREM
#undef G_ADD
#undef G_MUL
#undef G_FMA
#undef G_RELU
#undef GVEC_ACT
#undef G_SUB
#undef G_DIV
#undef G_MIN
#undef G_MAX
#undef G_ABS
#undef G_ROUND
#undef G_LDEXP
#undef G_SELNEG
#undef G_IS_F32
