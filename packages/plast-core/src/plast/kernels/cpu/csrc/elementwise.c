/* lgamma_r (special.h's plast_lgamma, for igamma): glibc declares it only for _DEFAULT_SOURCE under -std=c11 */
#define _DEFAULT_SOURCE
#include "elementwise.h"

#include <math.h>
#include <string.h>

#include "plast_omp.h"
#include "special.h" /* plast/_core/special.h: igamma, igammac, polygamma */

/* ---- scalar definitions of each op, shared by the portable path and the SIMD tails ---- */
#define S_ADD(x, y) ((x) + (y))
#define S_SUB(x, y) ((x) - (y))
#define S_MUL(x, y) ((x) * (y))
#define S_DIV(x, y) ((x) / (y))
#define S_MAX(x, y) (((x) > (y) || (x) != (x)) ? (x) : (y))
#define S_MIN(x, y) (((x) < (y) || (x) != (x)) ? (x) : (y))

/* portable loop: a_s / b_s are 0 (broadcast) or 1 */
#define SCALAR_LOOP(T, OP)                                                                                             \
    for (ptrdiff_t i = 0; i < n; i++) out[i] = OP(a[i * a_s], b[i * b_s]);

/* add..minimum: the whole integer kernel, and the float kernels' arithmetic */
#define SCALAR_KERNEL(T, NAME)                                                                                         \
    static void NAME(int op, const T *a, ptrdiff_t a_s, const T *b, ptrdiff_t b_s, T *out, ptrdiff_t n) {              \
        switch (op) {                                                                                                  \
        case PLAST_BIN_ADD: SCALAR_LOOP(T, S_ADD) break;                                                               \
        case PLAST_BIN_SUB: SCALAR_LOOP(T, S_SUB) break;                                                               \
        case PLAST_BIN_MUL: SCALAR_LOOP(T, S_MUL) break;                                                               \
        case PLAST_BIN_DIV: SCALAR_LOOP(T, S_DIV) break;                                                               \
        case PLAST_BIN_MAX: SCALAR_LOOP(T, S_MAX) break;                                                               \
        case PLAST_BIN_MIN: SCALAR_LOOP(T, S_MIN) break;                                                               \
        }                                                                                                              \
    }

SCALAR_KERNEL(int64_t, binary_scalar_i64)
SCALAR_KERNEL(int32_t, binary_scalar_i32)
SCALAR_KERNEL(float, binary_arith_f32)
SCALAR_KERNEL(double, binary_arith_f64)

/* pow, floor_divide, remainder and fmod, float32 and float64 only: torch's rules (c10's div_floor_floating and
 * remainder). floor_divide by zero is the IEEE quotient (+-inf or NaN); otherwise the quotient of the exact
 * remainder, rounded down, nudged up where floating rounding left it more than 1/2 below the true value, and
 * a zero quotient takes the sign of a / b. remainder takes the divisor's sign, keeping fmod's zero otherwise.
 * The loops call libm: correct first, and the compiler does not vectorize fmod. */
#define FLOAT_DIVISION(T, SUF, FMOD, FLOOR, COPYSIGN)                                                                  \
    static inline T floordiv_##SUF(T a, T b) {                                                                         \
        if (b == 0) return a / b;                                                                                      \
        T mod = FMOD(a, b);                                                                                            \
        T div = (a - mod) / b;                                                                                         \
        if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;                                                                \
        if (div == 0) return COPYSIGN((T)0, a / b);                                                                    \
        T fl = FLOOR(div);                                                                                             \
        return div - fl > (T)0.5 ? fl + 1 : fl;                                                                        \
    }                                                                                                                  \
    static inline T remainder_##SUF(T a, T b) {                                                                        \
        T mod = FMOD(a, b);                                                                                            \
        return mod != 0 && (b < 0) != (mod < 0) ? mod + b : mod;                                                       \
    }
FLOAT_DIVISION(float, f32, fmodf, floorf, copysignf)
FLOAT_DIVISION(double, f64, fmod, floor, copysign)

#define S_POW_f32(x, y) powf(x, y)
#define S_POW_f64(x, y) pow(x, y)

/* pow by one exponent for the whole loop (a Python number, or a broadcast value): torch's rules for a scalar
 * exponent, which also keep x ** 2 and x ** 0.5 (the common ones: squares, norms) as fast as mul and sqrt
 * instead of a libm call per element. As in torch, sqrt's -0 and NaN for -inf differ there from pow's. */
#define POW_BY_ONE(T, SUF, SQRT, POW)                                                                                  \
    static void pow_by_one_##SUF(const T *x, ptrdiff_t sx, T y, T *o, ptrdiff_t so, ptrdiff_t n) {                     \
        if (y == 2)                                                                                                    \
            for (ptrdiff_t i = 0; i < n; i++) o[i * so] = x[i * sx] * x[i * sx];                                       \
        else if (y == 3)                                                                                               \
            for (ptrdiff_t i = 0; i < n; i++) o[i * so] = x[i * sx] * x[i * sx] * x[i * sx];                           \
        else if (y == (T)0.5)                                                                                          \
            for (ptrdiff_t i = 0; i < n; i++) o[i * so] = SQRT(x[i * sx]);                                             \
        else if (y == -(T)0.5)                                                                                         \
            for (ptrdiff_t i = 0; i < n; i++) o[i * so] = (T)1 / SQRT(x[i * sx]);                                      \
        else if (y == -1)                                                                                              \
            for (ptrdiff_t i = 0; i < n; i++) o[i * so] = (T)1 / x[i * sx];                                            \
        else if (y == -2)                                                                                              \
            for (ptrdiff_t i = 0; i < n; i++) o[i * so] = (T)1 / (x[i * sx] * x[i * sx]);                              \
        else                                                                                                           \
            for (ptrdiff_t i = 0; i < n; i++) o[i * so] = POW(x[i * sx], y);                                           \
    }
POW_BY_ONE(float, f32, sqrtf, powf)
POW_BY_ONE(double, f64, sqrt, pow)
#define S_FLOORDIV_f32(x, y)  floordiv_f32(x, y)
#define S_FLOORDIV_f64(x, y)  floordiv_f64(x, y)
#define S_REMAINDER_f32(x, y) remainder_f32(x, y)
#define S_REMAINDER_f64(x, y) remainder_f64(x, y)
#define S_FMOD_f32(x, y)      fmodf(x, y)
#define S_FMOD_f64(x, y)      fmod(x, y)
#define S_ATAN2_f32(x, y)     atan2f(x, y)
#define S_ATAN2_f64(x, y)     atan2(x, y)
#define S_COPYSIGN_f32(x, y)  copysignf(x, y)
#define S_COPYSIGN_f64(x, y)  copysign(x, y)
#define S_NEXTAFTER_f32(x, y) nextafterf(x, y)
#define S_NEXTAFTER_f64(x, y) nextafter(x, y)
#define S_IGAMMA_f32(x, y)    (float)plast_igamma(0, x, y) /* in double, rounded once */
#define S_IGAMMA_f64(x, y)    plast_igamma(0, x, y)
#define S_IGAMMAC_f32(x, y)   (float)plast_igamma(1, x, y)
#define S_IGAMMAC_f64(x, y)   plast_igamma(1, x, y)
#define S_POLYGAMMA_f32(x, y) (float)plast_polygamma((int)(x), y)
#define S_POLYGAMMA_f64(x, y) plast_polygamma((int)(x), y)

/* the float kernels: the integer ones' arithmetic, then pow, floor_divide, remainder, fmod, atan2,
 * copysign, nextafter (libm) igamma/igammac and polygamma (special.h) */
#define SCALAR_FLOAT_KERNEL(T, SUF)                                                                                    \
    static void binary_scalar_##SUF(int op, const T *a, ptrdiff_t a_s, const T *b, ptrdiff_t b_s, T *out,              \
                                    ptrdiff_t n) {                                                                     \
        switch (op) {                                                                                                  \
        case PLAST_BIN_POW:                                                                                            \
            if (b_s == 0) pow_by_one_##SUF(a, a_s, b[0], out, 1, n);                                                   \
            else SCALAR_LOOP(T, S_POW_##SUF)                                                                           \
            break;                                                                                                     \
        case PLAST_BIN_FLOORDIV: SCALAR_LOOP(T, S_FLOORDIV_##SUF) break;                                               \
        case PLAST_BIN_REMAINDER: SCALAR_LOOP(T, S_REMAINDER_##SUF) break;                                             \
        case PLAST_BIN_FMOD: SCALAR_LOOP(T, S_FMOD_##SUF) break;                                                       \
        case PLAST_BIN_ATAN2: SCALAR_LOOP(T, S_ATAN2_##SUF) break;                                                     \
        case PLAST_BIN_COPYSIGN: SCALAR_LOOP(T, S_COPYSIGN_##SUF) break;                                               \
        case PLAST_BIN_NEXTAFTER: SCALAR_LOOP(T, S_NEXTAFTER_##SUF) break;                                             \
        case PLAST_BIN_IGAMMA: SCALAR_LOOP(T, S_IGAMMA_##SUF) break;                                                   \
        case PLAST_BIN_IGAMMAC: SCALAR_LOOP(T, S_IGAMMAC_##SUF) break;                                                 \
        case PLAST_BIN_POLYGAMMA: SCALAR_LOOP(T, S_POLYGAMMA_##SUF) break;                                             \
        default: binary_arith_##SUF(op, a, a_s, b, b_s, out, n);                                                       \
        }                                                                                                              \
    }
SCALAR_FLOAT_KERNEL(float, f32)
SCALAR_FLOAT_KERNEL(double, f64)

/* Integer division truncates in C; the op layer routes integer `/` to true division on floats, so the
 * integer DIV here is only reached for floor-free exact uses. Division by zero is checked in Python. */

#if PLAST_X86
/* ---- AVX-512: 16 floats / 8 doubles a step, masked tail ---- */
#define V512_MAXPS(x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_max_ps(x, y), x)
#define V512_MINPS(x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_min_ps(x, y), x)
#define V512_MAXPD(x, y) _mm512_mask_blend_pd(_mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q), _mm512_max_pd(x, y), x)
#define V512_MINPD(x, y) _mm512_mask_blend_pd(_mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q), _mm512_min_pd(x, y), x)

#define AVX512_LOOP(T, W, VT, LD, MLD, SET1, ST, MST, MASKT, VOP)                                                      \
    {                                                                                                                  \
        ptrdiff_t i = 0;                                                                                               \
        VT va = a_s ? SET1(0) : SET1(a[0]);                                                                            \
        VT vb = b_s ? SET1(0) : SET1(b[0]);                                                                            \
        for (; i + W <= n; i += W) {                                                                                   \
            VT x = a_s ? LD(a + i) : va;                                                                               \
            VT y = b_s ? LD(b + i) : vb;                                                                               \
            ST(out + i, VOP(x, y));                                                                                    \
        }                                                                                                              \
        if (i < n) {                                                                                                   \
            MASKT m = (MASKT)((1ULL << (n - i)) - 1);                                                                  \
            VT x = a_s ? MLD(SET1(0), m, a + i) : va;                                                                  \
            VT y = b_s ? MLD(SET1(0), m, b + i) : vb;                                                                  \
            MST(out + i, m, VOP(x, y));                                                                                \
        }                                                                                                              \
    }

#define AVX512_KERNEL(T, SUF, W, VT, LD, MLD, SET1, ST, MST, MASKT, ADD, SUB, MUL, DIV, MAX, MIN)                      \
    PLAST_TARGET_AVX512 static void binary_avx512_##SUF(int op, const T *a, ptrdiff_t a_s, const T *b, ptrdiff_t b_s,  \
                                                        T *out, ptrdiff_t n) {                                         \
        switch (op) {                                                                                                  \
        case PLAST_BIN_ADD: AVX512_LOOP(T, W, VT, LD, MLD, SET1, ST, MST, MASKT, ADD) break;                           \
        case PLAST_BIN_SUB: AVX512_LOOP(T, W, VT, LD, MLD, SET1, ST, MST, MASKT, SUB) break;                           \
        case PLAST_BIN_MUL: AVX512_LOOP(T, W, VT, LD, MLD, SET1, ST, MST, MASKT, MUL) break;                           \
        case PLAST_BIN_DIV: AVX512_LOOP(T, W, VT, LD, MLD, SET1, ST, MST, MASKT, DIV) break;                           \
        case PLAST_BIN_MAX: AVX512_LOOP(T, W, VT, LD, MLD, SET1, ST, MST, MASKT, MAX) break;                           \
        case PLAST_BIN_MIN: AVX512_LOOP(T, W, VT, LD, MLD, SET1, ST, MST, MASKT, MIN) break;                           \
        }                                                                                                              \
    }

AVX512_KERNEL(float, f32, 16, __m512, _mm512_loadu_ps, _mm512_mask_loadu_ps, _mm512_set1_ps, _mm512_storeu_ps,
              _mm512_mask_storeu_ps, __mmask16, _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps, _mm512_div_ps, V512_MAXPS,
              V512_MINPS)
AVX512_KERNEL(double, f64, 8, __m512d, _mm512_loadu_pd, _mm512_mask_loadu_pd, _mm512_set1_pd, _mm512_storeu_pd,
              _mm512_mask_storeu_pd, __mmask8, _mm512_add_pd, _mm512_sub_pd, _mm512_mul_pd, _mm512_div_pd, V512_MAXPD,
              V512_MINPD)

/* ---- AVX2: 8 floats / 4 doubles a step, scalar tail ---- */
#define V256_MAXPS(x, y) _mm256_blendv_ps(_mm256_max_ps(x, y), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q))
#define V256_MINPS(x, y) _mm256_blendv_ps(_mm256_min_ps(x, y), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q))
#define V256_MAXPD(x, y) _mm256_blendv_pd(_mm256_max_pd(x, y), x, _mm256_cmp_pd(x, x, _CMP_UNORD_Q))
#define V256_MINPD(x, y) _mm256_blendv_pd(_mm256_min_pd(x, y), x, _mm256_cmp_pd(x, x, _CMP_UNORD_Q))

#define AVX2_LOOP(T, W, VT, LD, SET1, ST, VOP, SOP)                                                                    \
    {                                                                                                                  \
        ptrdiff_t i = 0;                                                                                               \
        VT va = a_s ? SET1(0) : SET1(a[0]);                                                                            \
        VT vb = b_s ? SET1(0) : SET1(b[0]);                                                                            \
        for (; i + W <= n; i += W) {                                                                                   \
            VT x = a_s ? LD(a + i) : va;                                                                               \
            VT y = b_s ? LD(b + i) : vb;                                                                               \
            ST(out + i, VOP(x, y));                                                                                    \
        }                                                                                                              \
        for (; i < n; i++) out[i] = SOP(a[i * a_s], b[i * b_s]);                                                       \
    }

#define AVX2_KERNEL(T, SUF, W, VT, LD, SET1, ST, ADD, SUB, MUL, DIV, MAX, MIN)                                         \
    PLAST_TARGET_AVX2 static void binary_avx2_##SUF(int op, const T *a, ptrdiff_t a_s, const T *b, ptrdiff_t b_s,      \
                                                    T *out, ptrdiff_t n) {                                             \
        switch (op) {                                                                                                  \
        case PLAST_BIN_ADD: AVX2_LOOP(T, W, VT, LD, SET1, ST, ADD, S_ADD) break;                                       \
        case PLAST_BIN_SUB: AVX2_LOOP(T, W, VT, LD, SET1, ST, SUB, S_SUB) break;                                       \
        case PLAST_BIN_MUL: AVX2_LOOP(T, W, VT, LD, SET1, ST, MUL, S_MUL) break;                                       \
        case PLAST_BIN_DIV: AVX2_LOOP(T, W, VT, LD, SET1, ST, DIV, S_DIV) break;                                       \
        case PLAST_BIN_MAX: AVX2_LOOP(T, W, VT, LD, SET1, ST, MAX, S_MAX) break;                                       \
        case PLAST_BIN_MIN: AVX2_LOOP(T, W, VT, LD, SET1, ST, MIN, S_MIN) break;                                       \
        }                                                                                                              \
    }

AVX2_KERNEL(float, f32, 8, __m256, _mm256_loadu_ps, _mm256_set1_ps, _mm256_storeu_ps, _mm256_add_ps, _mm256_sub_ps,
            _mm256_mul_ps, _mm256_div_ps, V256_MAXPS, V256_MINPS)
AVX2_KERNEL(double, f64, 4, __m256d, _mm256_loadu_pd, _mm256_set1_pd, _mm256_storeu_pd, _mm256_add_pd, _mm256_sub_pd,
            _mm256_mul_pd, _mm256_div_pd, V256_MAXPD, V256_MINPD)
#endif /* PLAST_X86 */

void plast_binary_contig_f32(int simd, int op, const float *a, int a_bcast, const float *b, int b_bcast, float *out,
                             ptrdiff_t n) {
    ptrdiff_t as = a_bcast ? 0 : 1, bs = b_bcast ? 0 : 1;
#if PLAST_X86
    if (simd >= PLAST_SIMD_AVX512 && op < PLAST_BIN_POW) {
        binary_avx512_f32(op, a, as, b, bs, out, n);
        return;
    }
    if (simd >= PLAST_SIMD_AVX2 && op < PLAST_BIN_POW) {
        binary_avx2_f32(op, a, as, b, bs, out, n);
        return;
    }
#endif
    binary_scalar_f32(op, a, as, b, bs, out, n);
}

void plast_binary_contig_f64(int simd, int op, const double *a, int a_bcast, const double *b, int b_bcast, double *out,
                             ptrdiff_t n) {
    ptrdiff_t as = a_bcast ? 0 : 1, bs = b_bcast ? 0 : 1;
#if PLAST_X86
    if (simd >= PLAST_SIMD_AVX512 && op < PLAST_BIN_POW) {
        binary_avx512_f64(op, a, as, b, bs, out, n);
        return;
    }
    if (simd >= PLAST_SIMD_AVX2 && op < PLAST_BIN_POW) {
        binary_avx2_f64(op, a, as, b, bs, out, n);
        return;
    }
#endif
    binary_scalar_f64(op, a, as, b, bs, out, n);
}

/* ---- strided inner loop, for non-contiguous innermost dimensions ---- */
#define STRIDED_LOOP(T, OP)                                                                                            \
    for (ptrdiff_t i = 0; i < n; i++) o[i * so] = OP(x[i * sa], y[i * sb]);

#define STRIDED_KERNEL(T, NAME)                                                                                        \
    static void NAME(int op, const T *x, ptrdiff_t sa, const T *y, ptrdiff_t sb, T *o, ptrdiff_t so, ptrdiff_t n) {    \
        switch (op) {                                                                                                  \
        case PLAST_BIN_ADD: STRIDED_LOOP(T, S_ADD) break;                                                              \
        case PLAST_BIN_SUB: STRIDED_LOOP(T, S_SUB) break;                                                              \
        case PLAST_BIN_MUL: STRIDED_LOOP(T, S_MUL) break;                                                              \
        case PLAST_BIN_DIV: STRIDED_LOOP(T, S_DIV) break;                                                              \
        case PLAST_BIN_MAX: STRIDED_LOOP(T, S_MAX) break;                                                              \
        case PLAST_BIN_MIN: STRIDED_LOOP(T, S_MIN) break;                                                              \
        }                                                                                                              \
    }
STRIDED_KERNEL(int64_t, binary_strided_i64)
STRIDED_KERNEL(int32_t, binary_strided_i32)
STRIDED_KERNEL(float, binary_strided_arith_f32)
STRIDED_KERNEL(double, binary_strided_arith_f64)

#define STRIDED_FLOAT_KERNEL(T, SUF)                                                                                   \
    static void binary_strided_##SUF(int op, const T *x, ptrdiff_t sa, const T *y, ptrdiff_t sb, T *o, ptrdiff_t so,   \
                                     ptrdiff_t n) {                                                                    \
        switch (op) {                                                                                                  \
        case PLAST_BIN_POW:                                                                                            \
            if (sb == 0) pow_by_one_##SUF(x, sa, y[0], o, so, n);                                                      \
            else STRIDED_LOOP(T, S_POW_##SUF)                                                                          \
            break;                                                                                                     \
        case PLAST_BIN_FLOORDIV: STRIDED_LOOP(T, S_FLOORDIV_##SUF) break;                                              \
        case PLAST_BIN_REMAINDER: STRIDED_LOOP(T, S_REMAINDER_##SUF) break;                                            \
        case PLAST_BIN_FMOD: STRIDED_LOOP(T, S_FMOD_##SUF) break;                                                      \
        case PLAST_BIN_ATAN2: STRIDED_LOOP(T, S_ATAN2_##SUF) break;                                                    \
        case PLAST_BIN_COPYSIGN: STRIDED_LOOP(T, S_COPYSIGN_##SUF) break;                                              \
        case PLAST_BIN_NEXTAFTER: STRIDED_LOOP(T, S_NEXTAFTER_##SUF) break;                                            \
        case PLAST_BIN_IGAMMA: STRIDED_LOOP(T, S_IGAMMA_##SUF) break;                                                  \
        case PLAST_BIN_IGAMMAC: STRIDED_LOOP(T, S_IGAMMAC_##SUF) break;                                                \
        case PLAST_BIN_POLYGAMMA: STRIDED_LOOP(T, S_POLYGAMMA_##SUF) break;                                            \
        default: binary_strided_arith_##SUF(op, x, sa, y, sb, o, so, n);                                               \
        }                                                                                                              \
    }
STRIDED_FLOAT_KERNEL(float, f32)
STRIDED_FLOAT_KERNEL(double, f64)

static void run_inner(int simd, int op, int dtype, const char *a, ptrdiff_t sa, const char *b, ptrdiff_t sb, char *o,
                      ptrdiff_t so, ptrdiff_t n) {
    int fast = so == 1 && (sa == 0 || sa == 1) && (sb == 0 || sb == 1);
    switch (dtype) {
    case PLAST_DT_F32:
        if (fast)
            plast_binary_contig_f32(simd, op, (const float *)a, sa == 0, (const float *)b, sb == 0, (float *)o, n);
        else binary_strided_f32(op, (const float *)a, sa, (const float *)b, sb, (float *)o, so, n);
        break;
    case PLAST_DT_F64:
        if (fast)
            plast_binary_contig_f64(simd, op, (const double *)a, sa == 0, (const double *)b, sb == 0, (double *)o, n);
        else binary_strided_f64(op, (const double *)a, sa, (const double *)b, sb, (double *)o, so, n);
        break;
    case PLAST_DT_I64:
        if (fast) binary_scalar_i64(op, (const int64_t *)a, sa, (const int64_t *)b, sb, (int64_t *)o, n);
        else binary_strided_i64(op, (const int64_t *)a, sa, (const int64_t *)b, sb, (int64_t *)o, so, n);
        break;
    case PLAST_DT_I32:
        if (fast) binary_scalar_i32(op, (const int32_t *)a, sa, (const int32_t *)b, sb, (int32_t *)o, n);
        else binary_strided_i32(op, (const int32_t *)a, sa, (const int32_t *)b, sb, (int32_t *)o, so, n);
        break;
    }
}

static ptrdiff_t dtype_size(int dtype) {
    switch (dtype) {
    case PLAST_DT_BOOL: return 1;
    case PLAST_DT_I32:
    case PLAST_DT_F32: return 4;
    case PLAST_DT_I64:
    case PLAST_DT_F64: return 8;
    }
    return 0;
}

/* Elements per task when splitting a long inner dimension across threads. */
#define CHUNK 16384

/* A call's merged loop nest (innermost dim last), and its task t: chunk t % chunks_per_row of row
 * t / chunks_per_row. */
typedef struct {
    int simd, op, dtype, nd;
    const ptrdiff_t *sh, *sa, *sb, *so;
    ptrdiff_t es, inner, chunks_per_row;
    const char *a, *b;
    char *out;
} bin_job;

static inline void bin_task(const bin_job *j, ptrdiff_t t) {
    const int nd = j->nd;
    ptrdiff_t row = t / j->chunks_per_row, c = t % j->chunks_per_row;
    ptrdiff_t oa = 0, ob = 0, oo = 0, r = row;
    for (int d = nd - 2; d >= 0; d--) {
        ptrdiff_t i = r % j->sh[d];
        r /= j->sh[d];
        oa += i * j->sa[d];
        ob += i * j->sb[d];
        oo += i * j->so[d];
    }
    ptrdiff_t start = c * CHUNK;
    ptrdiff_t len = j->inner - start < CHUNK ? j->inner - start : CHUNK;
    oa += start * j->sa[nd - 1];
    ob += start * j->sb[nd - 1];
    oo += start * j->so[nd - 1];
    run_inner(j->simd, j->op, j->dtype, j->a + oa * j->es, j->sa[nd - 1], j->b + ob * j->es, j->sb[nd - 1],
              j->out + oo * j->es, j->so[nd - 1], len);
}

int plast_binary_nd(int simd, int nthreads, int op, int dtype, int ndim, const ptrdiff_t *shape, const char *a,
                    const ptrdiff_t *a_strides, const char *b, const ptrdiff_t *b_strides, char *out,
                    const ptrdiff_t *out_strides) {
    if (op < 0 || op >= PLAST_BIN_COUNT || dtype < PLAST_DT_I32 || dtype > PLAST_DT_F64 || ndim > PLAST_MAX_NDIM)
        return -1;
    /* integer division by zero traps in C: the op layer sends integer `/` to floats, and integer pow, `//`, `%`
     * and fmod elsewhere */
    if ((dtype == PLAST_DT_I32 || dtype == PLAST_DT_I64) && (op == PLAST_BIN_DIV || op >= PLAST_BIN_POW)) return -1;
    ptrdiff_t sh[PLAST_MAX_NDIM], sa[PLAST_MAX_NDIM], sb[PLAST_MAX_NDIM], so[PLAST_MAX_NDIM];
    int nd = 0;
    /* drop size-1 dims, then merge neighbours that are contiguous for every operand */
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0) return 0;
        if (shape[d] == 1) continue;
        if (nd > 0 && sa[nd - 1] == a_strides[d] * shape[d] && sb[nd - 1] == b_strides[d] * shape[d] &&
            so[nd - 1] == out_strides[d] * shape[d]) {
            sh[nd - 1] *= shape[d];
            sa[nd - 1] = a_strides[d];
            sb[nd - 1] = b_strides[d];
            so[nd - 1] = out_strides[d];
            continue;
        }
        sh[nd] = shape[d];
        sa[nd] = a_strides[d];
        sb[nd] = b_strides[d];
        so[nd] = out_strides[d];
        nd++;
    }
    if (nd == 0) { /* a single element */
        sh[0] = 1;
        sa[0] = sb[0] = so[0] = 0;
        nd = 1;
    }
    ptrdiff_t es = dtype_size(dtype);
    ptrdiff_t inner = sh[nd - 1];
    ptrdiff_t outer = 1;
    for (int d = 0; d < nd - 1; d++) outer *= sh[d];
    ptrdiff_t chunks_per_row = (inner + CHUNK - 1) / CHUNK;
    ptrdiff_t tasks = outer * chunks_per_row;
    ptrdiff_t total = outer * inner;
    int nt = nthreads;
    if (total < 2 * CHUNK || tasks < 2) nt = 1;
    if (nt > tasks) nt = (int)tasks;

    const bin_job j = {simd, op, dtype, nd, sh, sa, sb, so, es, inner, chunks_per_row, a, b, out};
    PLAST_PARALLEL_FOR(nt, tasks, bin_task, &j);
    return 0;
}
