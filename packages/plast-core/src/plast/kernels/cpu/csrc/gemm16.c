/* 16-bit GEMM (see gemm16.h): packing into AMX tile layouts, the AMX and AVX512-BF16 block kernels, the epilogue,
 * threading, and the widening path through plast_gemm_f32.
 *
 * Packed operands, shared by both bf16 paths. K is padded with zeros to KP, a multiple of 32 (one tile's depth),
 * and kq = KP / 32. A block of 32 rows of op(A) is two row tiles; row tile t, depth chunk q is a 16 x 32 bf16 tile
 * of 1 KiB at pa + (t * kq + q) * 512, element (i, kk) at i * 32 + kk. A block of B's columns is cut into panels
 * of 16; panel p, chunk q is the tile at pb + (p * kq + q) * 512 in the pair-interleaved layout tdpbf16ps reads:
 * element (k, j) of the chunk at (k / 2) * 32 + j * 2 + k % 2, so each 32-bit word holds the pair (k, k + 1) of
 * one column. Rows and columns past the edge are zero, so the kernels never branch on edges; only the epilogue
 * writes the valid part of each 32 x 32 block.
 *
 * Loops (per thread, over its rectangle of C): columns in blocks of nb (the packed B block stays in L2), then rows
 * in blocks of 32 (the packed A block, 32 x KP, is reused by every panel pair of the B block), then passes over
 * 256 depths (the A slice stays in L1), then 32-column panel pairs; a 32 x 32 block's float32 sums wait between
 * passes, and the epilogue finishes it after the last. The transposed A (a weight gradient's g^T) is packed with
 * AVX-512 transposes.
 */
#include "gemm16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_internal.h"
#include "half.h"

#if PLAST_HAVE_OPENMP
#include <omp.h>
#endif

#define G16_TILE 512 /* bf16 elements in one 16 x 32 tile (1 KiB) */
/* Depth chunks (of 32) per pass over a B block: the pass's A slice, 32 x 256 bf16 = 16 KiB, stays in L1. */
#define G16_PASS_CHUNKS 8
/* Work per thread below which a second thread costs more than it saves (AMX does about 1 TFLOP/s a core). */
#define G16_FLOPS_PER_THREAD 8.0e6

static inline ptrdiff_t g16_cdiv(ptrdiff_t a, ptrdiff_t b) { return (a + b - 1) / b; }
static inline ptrdiff_t g16_round_up(ptrdiff_t a, ptrdiff_t b) { return g16_cdiv(a, b) * b; }
static inline ptrdiff_t g16_min(ptrdiff_t a, ptrdiff_t b) { return a < b ? a : b; }

/* ---------------------------------------------------------------------------------------------------------- */
/* Scalar conversions: half.h. */

/* dst (dense rows x cols float32) = src (rows x cols, row stride lds) widened. */
static void g16_widen(int is_bf16, const uint16_t *src, ptrdiff_t lds, ptrdiff_t rows, ptrdiff_t cols, float *dst,
                      ptrdiff_t ldd) {
    for (ptrdiff_t r = 0; r < rows; r++) {
        const uint16_t *s = src + r * lds;
        float *d = dst + r * ldd;
        if (is_bf16)
            for (ptrdiff_t c = 0; c < cols; c++) d[c] = plast_bf16_to_f32(s[c]);
        else
            for (ptrdiff_t c = 0; c < cols; c++) d[c] = plast_f16_to_f32(s[c]);
    }
}

static void g16_narrow(int is_bf16, const float *src, ptrdiff_t lds, ptrdiff_t rows, ptrdiff_t cols, uint16_t *dst,
                       ptrdiff_t ldd) {
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *s = src + r * lds;
        uint16_t *d = dst + r * ldd;
        if (is_bf16)
            for (ptrdiff_t c = 0; c < cols; c++) d[c] = plast_f32_to_bf16(s[c]);
        else
            for (ptrdiff_t c = 0; c < cols; c++) d[c] = plast_f32_to_f16(s[c]);
    }
}

/* ---------------------------------------------------------------------------------------------------------- */
/* The widening path: every CPU, every 16-bit type. */

static int g16_widening(int is_bf16, int simd, int nthreads, int ta, int tb, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K,
                        float alpha, const uint16_t *A, ptrdiff_t lda, const uint16_t *B, ptrdiff_t ldb, float beta,
                        void *C, ptrdiff_t ldc, int out16, const plast_gemm_epilogue *ep) {
    const ptrdiff_t ra = ta ? K : M, ca = ta ? M : K, rb = tb ? N : K, cb = tb ? K : N;
    /* one allocation: A, B, and for a 16-bit C the float32 C, biases and residual */
    size_t n = (size_t)(ra * ca + rb * cb);
    const int c16 = out16 != 0;
    const int has_bc = c16 && ep && ep->bias_col, has_br = c16 && ep && ep->bias_row, has_r = c16 && ep && ep->residual;
    if (c16) n += (size_t)(M * N) + (has_bc ? (size_t)N : 0) + (has_br ? (size_t)M : 0) + (has_r ? (size_t)(M * N) : 0);
    float *buf = (float *)malloc((n ? n : 1) * sizeof(float));
    if (!buf) return PLAST_GEMM_ENOMEM;
    float *Af = buf, *Bf = Af + ra * ca, *p = Bf + rb * cb;
    g16_widen(is_bf16, A, lda, ra, ca, Af, ca);
    g16_widen(is_bf16, B, ldb, rb, cb, Bf, cb);
    plast_gemm_epilogue e = {0};
    if (ep) e = *ep;
    float *Cf = (float *)C;
    ptrdiff_t ldcf = ldc;
    if (c16) {
        Cf = p;
        p += M * N;
        ldcf = N;
        if (beta != 0.0f) g16_widen(is_bf16, (const uint16_t *)C, ldc, M, N, Cf, N);
        if (has_bc) {
            g16_widen(is_bf16, (const uint16_t *)ep->bias_col, 0, 1, N, p, N);
            e.bias_col = p;
            p += N;
        }
        if (has_br) {
            g16_widen(is_bf16, (const uint16_t *)ep->bias_row, 0, 1, M, p, M);
            e.bias_row = p;
            p += M;
        }
        if (has_r) {
            g16_widen(is_bf16, (const uint16_t *)ep->residual, ep->ldr, M, N, p, N);
            e.residual = p;
            e.ldr = N;
        }
    }
    const int vec = simd > PLAST_SIMD_AVX512 ? PLAST_SIMD_AVX512 : simd;
    int rc = plast_gemm_f32(vec, nthreads, ta, tb, M, N, K, alpha, Af, ca, Bf, cb, beta, Cf, ldcf, ep ? &e : NULL);
    if (rc == PLAST_GEMM_OK && c16) g16_narrow(is_bf16, Cf, N, M, N, (uint16_t *)C, ldc);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------------------------------------------------- */
/* The bf16 paths (x86-64 with AVX512-BF16, and AMX). */

#if PLAST_X86

typedef struct {
    int ta, tb, out16, path;
    ptrdiff_t K, KP, kq;
    float alpha, beta;
    const uint16_t *A, *B;
    ptrdiff_t lda, ldb, ldc;
    void *C;
    const plast_gemm_epilogue *ep;
} g16_args;

/* 16 x 16 transpose of 32-bit words in 16 registers: four butterfly stages, each swapping the off-diagonal b x b
 * blocks of every 2b x 2b block (b = 8, 4, 2, 1) with one two-source permute per row. */
PLAST_TARGET_AVX512 static void g16_transpose16x16(__m512i r[16]) {
    for (int b = 8; b >= 1; b /= 2) {
        int lo[16], hi[16];
        for (int c = 0; c < 16; c++) {
            lo[c] = (c & b) ? 16 + c - b : c; /* row x keeps its low half, takes row x + b's low half */
            hi[c] = (c & b) ? 16 + c : c + b; /* row x + b takes row x's high half, keeps its own high half */
        }
        const __m512i ilo = _mm512_loadu_si512(lo), ihi = _mm512_loadu_si512(hi);
        for (int x = 0; x < 16; x++) {
            if (x & b) continue;
            const __m512i a = r[x], c = r[x + b];
            r[x] = _mm512_permutex2var_epi32(a, ilo, c);
            r[x + b] = _mm512_permutex2var_epi32(a, ihi, c);
        }
    }
}

/* A stored [K, M] (op(A) = A^T): rows [i, i + mm) of op(A) are columns of storage. Per depth chunk of 32: the
 * storage rows k and k + 1 are interleaved into 32-bit words (k, k + 1) per column (as B is packed), which makes
 * 16 rows of 32 words; transposing each 16 x 16 half gives the two row tiles' 16 rows of 32 depths. */
PLAST_TARGET_AVX512 static void g16_pack_a_trans(const g16_args *g, ptrdiff_t i, ptrdiff_t mm, uint16_t *pa) {
    const ptrdiff_t K = g->K, kq = g->kq, lda = g->lda;
    const __mmask32 m = mm >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << mm) - 1u);
    uint16_t lo_idx[32], hi_idx[32]; /* 16-bit lanes: bits 0-4 pick the element, bit 5 the source */
    for (int c = 0; c < 16; c++) {
        lo_idx[2 * c] = (uint16_t)c; /* words 0..15: columns 0..15 of rows k (low half) and k + 1 (high half) */
        lo_idx[2 * c + 1] = (uint16_t)(32 + c);
        hi_idx[2 * c] = (uint16_t)(16 + c); /* words 16..31 */
        hi_idx[2 * c + 1] = (uint16_t)(48 + c);
    }
    const __m512i ilo = _mm512_loadu_si512(lo_idx), ihi = _mm512_loadu_si512(hi_idx);
    for (ptrdiff_t q = 0; q < kq; q++) {
        __m512i w0[16], w1[16];
        for (int pr = 0; pr < 16; pr++) {
            const ptrdiff_t k = q * 32 + 2 * pr;
            __m512i x0 = _mm512_setzero_si512(), x1 = _mm512_setzero_si512();
            if (k < K) x0 = _mm512_maskz_loadu_epi16(m, g->A + k * lda + i);
            if (k + 1 < K) x1 = _mm512_maskz_loadu_epi16(m, g->A + (k + 1) * lda + i);
            w0[pr] = _mm512_permutex2var_epi16(x0, ilo, x1);
            w1[pr] = _mm512_permutex2var_epi16(x0, ihi, x1);
        }
        g16_transpose16x16(w0);
        g16_transpose16x16(w1);
        uint16_t *t0 = pa + q * G16_TILE, *t1 = pa + (kq + q) * G16_TILE;
        for (int r = 0; r < 16; r++) {
            _mm512_storeu_si512(t0 + r * 32, w0[r]);
            _mm512_storeu_si512(t1 + r * 32, w1[r]);
        }
    }
}

/* Rows [i, i + mm) of op(A), all of K, into the two row tiles of a 32-row block (zero past the edges). */
static void g16_pack_a(const g16_args *g, ptrdiff_t i, ptrdiff_t mm, uint16_t *pa) {
    if (g->ta) {
        g16_pack_a_trans(g, i, mm, pa);
        return;
    }
    const ptrdiff_t K = g->K, kq = g->kq;
    if (mm < 32 || K != g->KP) memset(pa, 0, (size_t)(2 * kq * G16_TILE) * sizeof(uint16_t));
    for (ptrdiff_t r = 0; r < mm; r++) {
        const uint16_t *src = g->A + (i + r) * g->lda;
        uint16_t *dst = pa + (r / 16) * kq * G16_TILE + (r % 16) * 32;
        for (ptrdiff_t q = 0; q < kq; q++) {
            const ptrdiff_t w = g16_min(32, K - q * 32);
            memcpy(dst + q * G16_TILE, src + q * 32, (size_t)w * sizeof(uint16_t));
        }
    }
}

/* Columns [j, j + nn) of op(B), all of K, into ceil(nn / 16) pair-interleaved panels; the panels up to npan are
 * zero-filled past nn. */
PLAST_TARGET_AVX512 static void g16_pack_b(const g16_args *g, ptrdiff_t j, ptrdiff_t nn, ptrdiff_t npan, uint16_t *pb) {
    const ptrdiff_t K = g->K, kq = g->kq, ldb = g->ldb;
    const uint16_t *B = g->B;
    for (ptrdiff_t p = 0; p < npan; p++) {
        const ptrdiff_t c0 = p * 16, w = g16_min(16, nn - c0 > 0 ? nn - c0 : 0);
        uint16_t *panel = pb + p * kq * G16_TILE;
        if (w == 0) {
            memset(panel, 0, (size_t)(kq * G16_TILE) * sizeof(uint16_t));
            continue;
        }
        if (!g->tb) {
            /* B stored [K, N]: interleave rows k and k + 1, 16 columns at a time */
            const __mmask16 m = (__mmask16)((1u << w) - 1u);
            for (ptrdiff_t k = 0; k < g->KP; k += 2) {
                __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
                if (k < K) lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, B + k * ldb + j + c0));
                if (k + 1 < K) hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, B + (k + 1) * ldb + j + c0));
                _mm512_storeu_si512(panel + (k / 32) * G16_TILE + ((k % 32) / 2) * 32,
                                    _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
            }
        } else {
            /* B stored [N, K]: the pair (k, k + 1) of column c is one 32-bit word of storage row c, so each tile
             * is a 16 x 16 transpose of 32-bit words: the 16 columns' 32 depths loaded as rows, transposed */
            for (ptrdiff_t q = 0; q < kq; q++) {
                const ptrdiff_t k0 = q * 32, kw = g16_min(32, K - k0);
                const __mmask32 km = kw >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << kw) - 1u);
                __m512i r[16];
                for (int c = 0; c < 16; c++)
                    r[c] = c < w ? _mm512_maskz_loadu_epi16(km, B + (j + c0 + c) * ldb + k0) : _mm512_setzero_si512();
                g16_transpose16x16(r);
                uint16_t *tile = panel + q * G16_TILE;
                for (int kp = 0; kp < 16; kp++) _mm512_storeu_si512(tile + kp * 32, r[kp]);
            }
        }
    }
}

typedef struct __attribute__((aligned(64))) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} g16_tilecfg;

/* Every tile 16 rows x 64 bytes: C tiles of 16 x 16 float32, A tiles of 16 x 32 bf16, B tiles of 16 pair rows. */
PLAST_TARGET_AMX static void g16_amx_configure(void) {
    g16_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    /* not GCC's _tile_loadconfig: its asm names only the first 8 bytes as read, so the compiler may drop the
     * stores of colsb and rows */
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

PLAST_TARGET_AMX static void g16_amx_release(void) { _tile_release(); }

/* acc[32][32] (+)= the A block (two row tiles at pa) times the panel pair at pb, over depth chunks [q0, q0 + qn)
 * of kq; acc (row stride lda floats) is read first when `load`, else the product starts from zero. */
PLAST_TARGET_AMX static void g16_block_amx(const uint16_t *pa, const uint16_t *pb, ptrdiff_t kq, ptrdiff_t q0,
                                           ptrdiff_t qn, float *acc, ptrdiff_t ldacc, int load) {
    const size_t st = (size_t)ldacc * sizeof(float);
    const uint16_t *a0 = pa + q0 * G16_TILE, *a1 = pa + (kq + q0) * G16_TILE;
    const uint16_t *b0 = pb + q0 * G16_TILE, *b1 = pb + (kq + q0) * G16_TILE;
    /* GCC's tile loads and stores are asm without memory operands: order them against the C around them */
    __asm__ volatile("" ::: "memory");
    if (load) {
        _tile_loadd(0, acc, st);
        _tile_loadd(1, acc + 16, st);
        _tile_loadd(2, acc + 16 * ldacc, st);
        _tile_loadd(3, acc + 16 * ldacc + 16, st);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (ptrdiff_t q = 0; q < qn; q++) {
        /* the B tiles two chunks ahead into L1 (they stream from L2; A's slice is already in L1). A prefetch
         * past the buffer's end is harmless: prefetches never fault. */
        const char *n0 = (const char *)(b0 + (q + 2) * G16_TILE), *n1 = (const char *)(b1 + (q + 2) * G16_TILE);
        for (int l = 0; l < 1024; l += 64) {
            _mm_prefetch(n0 + l, _MM_HINT_T0);
            _mm_prefetch(n1 + l, _MM_HINT_T0);
        }
        _tile_loadd(4, a0 + q * G16_TILE, 64);
        _tile_loadd(6, b0 + q * G16_TILE, 64);
        _tile_loadd(7, b1 + q * G16_TILE, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(5, a1 + q * G16_TILE, 64);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, acc, st);
    _tile_stored(1, acc + 16, st);
    _tile_stored(2, acc + 16 * ldacc, st);
    _tile_stored(3, acc + 16 * ldacc + 16, st);
    __asm__ volatile("" ::: "memory");
}

/* The same product with vdpbf16ps: four groups of 8 rows, 16 zmm accumulators each (8 rows x 2 panels). */
PLAST_TARGET_AVX512_BF16 static void g16_block_dp(const uint16_t *pa, const uint16_t *pb, ptrdiff_t kq, ptrdiff_t q0,
                                                  ptrdiff_t qn, float *acc, ptrdiff_t ldacc, int load) {
    const uint16_t *b0 = pb + q0 * G16_TILE, *b1 = pb + (kq + q0) * G16_TILE;
    for (int rg = 0; rg < 4; rg++) {
        const uint16_t *a = pa + (rg / 2) * kq * G16_TILE + q0 * G16_TILE + (rg % 2) * 8 * 32;
        float *out = acc + rg * 8 * ldacc;
        __m512 c[8][2];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
            c[i][0] = load ? _mm512_loadu_ps(out + i * ldacc) : _mm512_setzero_ps();
            c[i][1] = load ? _mm512_loadu_ps(out + i * ldacc + 16) : _mm512_setzero_ps();
        }
        for (ptrdiff_t q = 0; q < qn; q++) {
            const uint16_t *at = a + q * G16_TILE, *bt0 = b0 + q * G16_TILE, *bt1 = b1 + q * G16_TILE;
            for (int pr = 0; pr < 16; pr++) {
                const __m512i x0 = _mm512_loadu_si512(bt0 + pr * 32), x1 = _mm512_loadu_si512(bt1 + pr * 32);
#pragma GCC unroll 8
                for (int i = 0; i < 8; i++) {
                    int32_t pair;
                    memcpy(&pair, at + i * 32 + pr * 2, sizeof pair);
                    const __m512i av = _mm512_set1_epi32(pair);
                    c[i][0] = _mm512_dpbf16_ps(c[i][0], (__m512bh)av, (__m512bh)x0);
                    c[i][1] = _mm512_dpbf16_ps(c[i][1], (__m512bh)av, (__m512bh)x1);
                }
            }
        }
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
            _mm512_storeu_ps(out + i * ldacc, c[i][0]);
            _mm512_storeu_ps(out + i * ldacc + 16, c[i][1]);
        }
    }
}

/* The epilogue's activations, vectorized (gemm_act.h instantiated for AVX-512 float). */
#define GT          float
#define GS          f32
#define GSFX        f32_g16
#define GTARGET     PLAST_TARGET_AVX512
#define GNAME(x)    GCAT(x, GSFX)
#define GCAT_(a, b) a##_##b
#define GCAT(a, b)  GCAT_(a, b)
#include "gemm_avx512_f32.h"
#include "gemm_act.h"

PLAST_TARGET_AVX512 static inline __m512 g16_load(const void *p, ptrdiff_t off, int c16, __mmask16 m) {
    if (c16) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + off));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
    return _mm512_maskz_loadu_ps(m, (const float *)p + off);
}

/* Round to nearest even with torch's NaN (0x7fc0), 16 lanes: the integer form of plast_f32_to_bf16. */
PLAST_TARGET_AVX512 static inline __m256i g16_round_bf16(__m512 x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, _mm512_set1_epi32(0x7fc0));
    return _mm512_cvtepi32_epi16(r);
}

/* C[i + r, j + c] for r < mm, c < nn from tmp[32][32]: alpha, beta * C, biases, activation, residual, rounding.
 * The epilogue's fields are read once into locals, so the row loop's tests are loop-invariant (GCC unswitches
 * them) and the column bias is loaded once per block. */
PLAST_TARGET_AVX512 static void g16_store(const g16_args *g, const float *tmp, ptrdiff_t i, ptrdiff_t j, ptrdiff_t mm,
                                          ptrdiff_t nn) {
    const plast_gemm_epilogue *ep = g->ep;
    const int c16 = g->out16, act = ep ? ep->act : PLAST_ACT_NONE;
    const void *bc = ep ? ep->bias_col : NULL, *brow = ep ? ep->bias_row : NULL, *res = ep ? ep->residual : NULL;
    const ptrdiff_t ldr = ep ? ep->ldr : 0, ldc = g->ldc;
    const float alpha = g->alpha, beta = g->beta;
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const int halves = nn > 16 ? 2 : 1;
    __mmask16 mk[2];
    __m512 bcv[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int h = 0; h < halves; h++) {
        const ptrdiff_t w = g16_min(16, nn - 16 * h);
        mk[h] = (__mmask16)((1u << w) - 1u);
        if (bc) bcv[h] = g16_load(bc, j + 16 * h, c16, mk[h]);
    }
    for (ptrdiff_t r = 0; r < mm; r++) {
        const ptrdiff_t row = i + r;
        __m512 vbr = _mm512_setzero_ps();
        if (brow)
            vbr = _mm512_set1_ps(c16 ? plast_bf16_to_f32(((const uint16_t *)brow)[row]) : ((const float *)brow)[row]);
        for (int h = 0; h < halves; h++) {
            const ptrdiff_t off = row * ldc + j + 16 * h;
            __m512 x = _mm512_loadu_ps(tmp + r * 32 + 16 * h);
            if (alpha != 1.0f) x = _mm512_mul_ps(va, x);
            if (beta != 0.0f) x = _mm512_fmadd_ps(vb, g16_load(g->C, off, c16, mk[h]), x);
            if (bc) x = _mm512_add_ps(x, bcv[h]);
            if (brow) x = _mm512_add_ps(x, vbr);
            if (act != PLAST_ACT_NONE) x = GNAME(vact)(x, act);
            if (res) x = _mm512_add_ps(x, g16_load(res, row * ldr + j + 16 * h, c16, mk[h]));
            if (c16) _mm256_mask_storeu_epi16((uint16_t *)g->C + off, mk[h], g16_round_bf16(x));
            else _mm512_mask_storeu_ps((float *)g->C + off, mk[h], x);
        }
    }
}

/* One thread's rectangle [i0, i0 + m) x [j0, j0 + n) of C. */
static int g16_serial(const g16_args *g, ptrdiff_t i0, ptrdiff_t m, ptrdiff_t j0, ptrdiff_t n) {
    const ptrdiff_t KP = g->KP, kq = g->kq;
    /* columns per packed B block: the block (nb x KP bf16) within about 1 MiB of L2 */
    ptrdiff_t nb = ((ptrdiff_t)1 << 20) / (KP * 2) / 32 * 32;
    if (nb < 32) nb = 32;
    nb = g16_min(nb, g16_round_up(n, 32));
    /* passes of G16_PASS_CHUNKS depth chunks: a pass's slice of the A block stays in L1 while every panel pair of the B block streams past it from L2; the 32 x 32 float32 sums of each panel pair
     * wait in acc (32 x nb), or in C itself for a plain float32 product, between passes */
    const ptrdiff_t kqb = G16_PASS_CHUNKS;
    const size_t a_bytes = (size_t)(32 * KP) * 2, b_bytes = (size_t)(nb * KP) * 2, acc_bytes = (size_t)(32 * nb) * 4;
    char *buf = (char *)plast_gemm_scratch(a_bytes + b_bytes + acc_bytes + 128);
    if (!buf) return PLAST_GEMM_ENOMEM;
    uint16_t *pa = (uint16_t *)buf, *pb = (uint16_t *)(buf + a_bytes);
    float *acc = (float *)(buf + g16_round_up((ptrdiff_t)(a_bytes + b_bytes), 64));
    const int amx = g->path == PLAST_SIMD_AMX;
    const int plain = !g->out16 && g->alpha == 1.0f && g->beta == 0.0f && !g->ep;
    if (amx) g16_amx_configure();
    for (ptrdiff_t jc = 0; jc < n; jc += nb) {
        const ptrdiff_t nn = g16_min(nb, n - jc);
        g16_pack_b(g, j0 + jc, nn, g16_cdiv(nn, 32) * 2, pb);
        for (ptrdiff_t ic = 0; ic < m; ic += 32) {
            const ptrdiff_t mm = g16_min(32, m - ic);
            g16_pack_a(g, i0 + ic, mm, pa);
            for (ptrdiff_t q0 = 0; q0 < kq; q0 += kqb) {
                const ptrdiff_t qn = g16_min(kqb, kq - q0);
                for (ptrdiff_t jr = 0; jr < nn; jr += 32) {
                    const uint16_t *pbj = pb + (jr / 16) * kq * G16_TILE;
                    /* a whole block of a plain float32 product accumulates in C itself: no epilogue pass */
                    const int in_c = plain && mm == 32 && nn - jr >= 32;
                    float *blk = in_c ? (float *)g->C + (i0 + ic) * g->ldc + j0 + jc + jr : acc + jr * 32;
                    const ptrdiff_t ld = in_c ? g->ldc : 32;
                    if (amx) g16_block_amx(pa, pbj, kq, q0, qn, blk, ld, q0 > 0);
                    else g16_block_dp(pa, pbj, kq, q0, qn, blk, ld, q0 > 0);
                    if (!in_c && q0 + qn == kq) g16_store(g, blk, i0 + ic, j0 + jc + jr, mm, g16_min(32, nn - jr));
                }
            }
        }
    }
    if (amx) g16_amx_release();
    return PLAST_GEMM_OK;
}

/* Thread t's rectangle of a tm x tn grid of 32 x 32 blocks over p threads, the grid minimising the rows plus
 * columns each thread packs. */
static void g16_partition(int p, int t, ptrdiff_t M, ptrdiff_t N, ptrdiff_t *i0, ptrdiff_t *m, ptrdiff_t *j0,
                          ptrdiff_t *n) {
    const ptrdiff_t mt = g16_cdiv(M, 32), nt = g16_cdiv(N, 32);
    int best_tm = 1;
    double best = -1;
    for (int tm = 1; tm <= p; tm++) {
        if (p % tm || tm > mt || p / tm > nt) continue;
        const double cost = (double)M / tm + (double)N / (p / tm);
        if (best < 0 || cost < best) {
            best = cost;
            best_tm = tm;
        }
    }
    const int tm = best_tm, tn = p / best_tm, ti = t / tn, tj = t % tn;
    const ptrdiff_t ilo = mt * ti / tm, ihi = mt * (ti + 1) / tm, jlo = nt * tj / tn, jhi = nt * (tj + 1) / tn;
    *i0 = ilo * 32;
    *m = g16_min(ihi * 32, M) - *i0;
    *j0 = jlo * 32;
    *n = g16_min(jhi * 32, N) - *j0;
    if (*m < 0) *m = 0;
    if (*n < 0) *n = 0;
}

static int g16_threads(int nthreads, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K) {
    if (nthreads <= 1 || !PLAST_HAVE_OPENMP) return 1;
    double want = 2.0 * (double)M * (double)N * (double)K / G16_FLOPS_PER_THREAD;
    const double blocks = (double)g16_cdiv(M, 32) * (double)g16_cdiv(N, 32);
    if (want > blocks) want = blocks;
    if (want < 2) return 1;
    return want < nthreads ? (int)want : nthreads;
}

static int g16_tiled(const g16_args *g, int nthreads, ptrdiff_t M, ptrdiff_t N) {
    const int nt = g16_threads(nthreads, M, N, g->K);
    if (nt <= 1) return g16_serial(g, 0, M, 0, N);
    int err = 0;
#if PLAST_HAVE_OPENMP
#pragma omp parallel num_threads(nt) reduction(| : err)
    {
        ptrdiff_t i0, m, j0, n;
        g16_partition(omp_get_num_threads(), omp_get_thread_num(), M, N, &i0, &m, &j0, &n);
        if (m > 0 && n > 0) err |= g16_serial(g, i0, m, j0, n);
    }
#endif
    return err ? PLAST_GEMM_ENOMEM : PLAST_GEMM_OK;
}

#endif /* PLAST_X86 */

/* ---------------------------------------------------------------------------------------------------------- */

int plast_gemm_bf16_path(int simd) { return plast_gemm_clamp_simd(simd); }

int plast_gemm_bf16(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K,
                    float alpha, const uint16_t *A, ptrdiff_t lda, const uint16_t *B, ptrdiff_t ldb, float beta,
                    void *C, ptrdiff_t ldc, int out16, const plast_gemm_epilogue *ep) {
    if (M <= 0 || N <= 0) return PLAST_GEMM_OK;
    const int path = plast_gemm_clamp_simd(simd);
#if PLAST_X86
    if (path >= PLAST_SIMD_AVX512_BF16 && K > 0 && alpha != 0.0f) {
        const g16_args g = {
            trans_a, trans_b, out16 != 0, path, K, g16_round_up(K, 32), g16_round_up(K, 32) / 32, alpha, beta, A, B,
            lda,     ldb,     ldc,        C,    ep};
        return g16_tiled(&g, nthreads, M, N);
    }
#endif
    return g16_widening(1, path, nthreads, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, out16, ep);
}

int plast_gemm_f16(int simd, int nthreads, int trans_a, int trans_b, ptrdiff_t M, ptrdiff_t N, ptrdiff_t K, float alpha,
                   const uint16_t *A, ptrdiff_t lda, const uint16_t *B, ptrdiff_t ldb, float beta, void *C,
                   ptrdiff_t ldc, int out16, const plast_gemm_epilogue *ep) {
    if (M <= 0 || N <= 0) return PLAST_GEMM_OK;
    return g16_widening(0, plast_gemm_clamp_simd(simd), nthreads, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
                        beta, C, ldc, out16, ep);
}
