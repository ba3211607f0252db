/* lgamma_r (special.h's plast_lgamma): glibc declares it only for _DEFAULT_SOURCE under -std=c11 */
#define _DEFAULT_SOURCE
#include "unary.h"

#include <math.h>
#include <string.h>

#include "plast_omp.h"
#include "special.h" /* plast/_core/special.h */

/* float32 bodies at every level (vec_levels.h), then the float64 subset (vec_levels_f64.h) */
#define PLAST_VEC_BODY "unary_simd.h"
#define VT             float
#define VT_F64         0
#include "vec_levels.h"
#undef VT
#undef PLAST_VEC_BODY
#define PLAST_VEC_BODY "unary_f64_simd.h"
#define VT             double
#include "vec_levels_f64.h"
#undef VT

#define F32_LOOP(EXPR)                                                                                                 \
    for (ptrdiff_t i = 0; i < n; i++) {                                                                                \
        float v = x[i];                                                                                                \
        y[i] = EXPR;                                                                                                   \
    }

/* asin..i1 in float32: no vector form (rare ops); float libm where it has the function, else the double
 * function rounded once */
static void unary_scalar_f32(int op, const float *x, float *y, ptrdiff_t n) {
    switch (op) {
    case PLAST_UN_ASIN: F32_LOOP(asinf(v)) break;
    case PLAST_UN_ACOS: F32_LOOP(acosf(v)) break;
    case PLAST_UN_ATAN: F32_LOOP(atanf(v)) break;
    case PLAST_UN_ASINH: F32_LOOP(asinhf(v)) break;
    case PLAST_UN_ACOSH: F32_LOOP(acoshf(v)) break;
    case PLAST_UN_ATANH: F32_LOOP(atanhf(v)) break;
    case PLAST_UN_ERFC: F32_LOOP((float)erfc(v)) break; /* erfcf rounds badly where the result is denormal */
    case PLAST_UN_ERFINV: F32_LOOP((float)plast_erfinv(v)) break;
    case PLAST_UN_LGAMMA: F32_LOOP((float)plast_lgamma(v)) break;
    case PLAST_UN_DIGAMMA: F32_LOOP((float)plast_digamma(v)) break;
    case PLAST_UN_TRIGAMMA: F32_LOOP((float)plast_trigamma(v)) break;
    case PLAST_UN_I0: F32_LOOP((float)plast_bessel_i(0, v)) break;
    case PLAST_UN_I1: F32_LOOP((float)plast_bessel_i(1, v)) break;
    }
}

void plast_unary_contig_f32(int simd, int op, const float *x, float *y, ptrdiff_t n) {
    if (op >= PLAST_UN_ASIN && op <= PLAST_UN_I1) {
        unary_scalar_f32(op, x, y, n);
        return;
    }
    PLAST_VEC_DISPATCH(unary_f32, op, x, y, n);
}

static double sgn(double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : v; }

/* the GELU derivatives, torch's formulas (vmath_simd.h has the float32 forms) */
static double gelu_tanh_grad(double x) {
    const double b = 0.79788456080286535588, k = 0.044715;
    double t = tanh(b * (x + k * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * b * (1.0 + 3.0 * k * x * x);
}

static double gelu_erf_grad(double x) {
    return 0.5 * (1.0 + erf(x * 0.70710678118654752440)) + x * exp(-0.5 * x * x) * 0.39894228040143267794;
}

#define F64_LOOP(EXPR)                                                                                                 \
    for (ptrdiff_t i = 0; i < n; i++) {                                                                                \
        double v = x[i];                                                                                               \
        y[i] = EXPR;                                                                                                   \
    }

void plast_unary_contig_f64(int op, const double *x, double *y, ptrdiff_t n) {
    switch (op) {
    case PLAST_UN_EXP: F64_LOOP(exp(v)) break;
    case PLAST_UN_LOG: F64_LOOP(log(v)) break;
    case PLAST_UN_LOG1P: F64_LOOP(log1p(v)) break;
    case PLAST_UN_SQRT: F64_LOOP(sqrt(v)) break;
    case PLAST_UN_RSQRT: F64_LOOP(1.0 / sqrt(v)) break;
    case PLAST_UN_TANH: F64_LOOP(tanh(v)) break;
    case PLAST_UN_SIGMOID: F64_LOOP(1.0 / (1.0 + exp(-v))) break;
    case PLAST_UN_RELU: F64_LOOP(v > 0 || v != v ? v : 0.0) break;
    case PLAST_UN_ABS: F64_LOOP(fabs(v)) break;
    case PLAST_UN_NEG: F64_LOOP(-v) break;
    case PLAST_UN_GELU_TANH: F64_LOOP(v / (1.0 + exp(-2.0 * 0.79788456080286536 * (v + 0.044715 * v * v * v)))) break;
    case PLAST_UN_GELU_ERF:
        F64_LOOP(v < 0 ? 0.5 * v * erfc(-v * 0.70710678118654752) : 0.5 * v * (1.0 + erf(v * 0.70710678118654752)))
        break;
    case PLAST_UN_SILU: F64_LOOP(v / (1.0 + exp(-v))) break;
    case PLAST_UN_ERF: F64_LOOP(erf(v)) break;
    case PLAST_UN_RECIP: F64_LOOP(1.0 / v) break;
    case PLAST_UN_SQUARE: F64_LOOP(v * v) break;
    case PLAST_UN_SIGN: F64_LOOP(sgn(v)) break;
    case PLAST_UN_SIN: F64_LOOP(sin(v)) break;
    case PLAST_UN_COS: F64_LOOP(cos(v)) break;
    case PLAST_UN_FLOOR: F64_LOOP(floor(v)) break;
    case PLAST_UN_CEIL: F64_LOOP(ceil(v)) break;
    case PLAST_UN_TRUNC: F64_LOOP(trunc(v)) break;
    case PLAST_UN_ROUND: F64_LOOP(rint(v)) break; /* half to even (the default rounding mode) */
    case PLAST_UN_EXP2: F64_LOOP(exp2(v)) break;
    case PLAST_UN_LOG2: F64_LOOP(log2(v)) break;
    case PLAST_UN_LOG10: F64_LOOP(log10(v)) break;
    case PLAST_UN_EXPM1: F64_LOOP(expm1(v)) break;
    case PLAST_UN_ASIN: F64_LOOP(asin(v)) break;
    case PLAST_UN_ACOS: F64_LOOP(acos(v)) break;
    case PLAST_UN_ATAN: F64_LOOP(atan(v)) break;
    case PLAST_UN_ASINH: F64_LOOP(asinh(v)) break;
    case PLAST_UN_ACOSH: F64_LOOP(acosh(v)) break;
    case PLAST_UN_ATANH: F64_LOOP(atanh(v)) break;
    case PLAST_UN_ERFC: F64_LOOP(erfc(v)) break;
    case PLAST_UN_ERFINV: F64_LOOP(plast_erfinv(v)) break;
    case PLAST_UN_LGAMMA: F64_LOOP(plast_lgamma(v)) break;
    case PLAST_UN_DIGAMMA: F64_LOOP(plast_digamma(v)) break;
    case PLAST_UN_TRIGAMMA: F64_LOOP(plast_trigamma(v)) break;
    case PLAST_UN_I0: F64_LOOP(plast_bessel_i(0, v)) break;
    case PLAST_UN_I1: F64_LOOP(plast_bessel_i(1, v)) break;
    case PLAST_UN_GELU_TANH_GRAD: F64_LOOP(gelu_tanh_grad(v)) break;
    case PLAST_UN_GELU_ERF_GRAD: F64_LOOP(gelu_erf_grad(v)) break;
    }
}

void plast_unary_contig_f64_simd(int simd, int op, const double *x, double *y, ptrdiff_t n) {
    if (!PLAST_VEC_CALL(unary_f64, op, x, y, n)) plast_unary_contig_f64(op, x, y, n);
}

/* Elements per task: big enough to amortize the OpenMP fork, small enough to balance two cores. */
#define CHUNK 16384
/* Strided rows are gathered into a buffer of this many elements, computed contiguously, scattered back. */
#define TILE 512

static void run_row(int simd, int op, int dtype, const char *x, ptrdiff_t sx, char *y, ptrdiff_t sy, ptrdiff_t n) {
    if (dtype == PLAST_DT_F32) {
        const float *xf = (const float *)x;
        float *yf = (float *)y;
        if (sx == 1 && sy == 1) {
            plast_unary_contig_f32(simd, op, xf, yf, n);
            return;
        }
        float buf[TILE];
        for (ptrdiff_t s = 0; s < n; s += TILE) {
            ptrdiff_t m = n - s < TILE ? n - s : TILE;
            for (ptrdiff_t i = 0; i < m; i++) buf[i] = xf[(s + i) * sx];
            plast_unary_contig_f32(simd, op, buf, buf, m);
            for (ptrdiff_t i = 0; i < m; i++) yf[(s + i) * sy] = buf[i];
        }
    } else {
        const double *xd = (const double *)x;
        double *yd = (double *)y;
        if (sx == 1 && sy == 1) {
            plast_unary_contig_f64_simd(simd, op, xd, yd, n);
            return;
        }
        double buf[TILE];
        for (ptrdiff_t s = 0; s < n; s += TILE) {
            ptrdiff_t m = n - s < TILE ? n - s : TILE;
            for (ptrdiff_t i = 0; i < m; i++) buf[i] = xd[(s + i) * sx];
            plast_unary_contig_f64_simd(simd, op, buf, buf, m);
            for (ptrdiff_t i = 0; i < m; i++) yd[(s + i) * sy] = buf[i];
        }
    }
}

/* A call's merged loop nest (innermost dim last), and its task t: chunk t % per_row of row t / per_row. */
typedef struct {
    int simd, op, dtype, nd;
    const ptrdiff_t *sh, *sx, *sy;
    ptrdiff_t es, inner, per_row;
    const char *x;
    char *y;
} un_job;

static inline void un_task(const un_job *j, ptrdiff_t t) {
    const int nd = j->nd;
    ptrdiff_t row = t / j->per_row, c = t % j->per_row, ox = 0, oy = 0, r = row;
    for (int d = nd - 2; d >= 0; d--) {
        ptrdiff_t i = r % j->sh[d];
        r /= j->sh[d];
        ox += i * j->sx[d];
        oy += i * j->sy[d];
    }
    ptrdiff_t start = c * CHUNK;
    ptrdiff_t len = j->inner - start < CHUNK ? j->inner - start : CHUNK;
    ox += start * j->sx[nd - 1];
    oy += start * j->sy[nd - 1];
    run_row(j->simd, j->op, j->dtype, j->x + ox * j->es, j->sx[nd - 1], j->y + oy * j->es, j->sy[nd - 1], len);
}

int plast_unary_nd(int simd, int nthreads, int op, int dtype, int ndim, const ptrdiff_t *shape, const char *x,
                   const ptrdiff_t *x_strides, char *y, const ptrdiff_t *y_strides) {
    if (op < 0 || op >= PLAST_UN_COUNT || (dtype != PLAST_DT_F32 && dtype != PLAST_DT_F64) || ndim > 16) return -1;
    ptrdiff_t sh[16], sx[16], sy[16];
    int nd = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0) return 0;
        if (shape[d] == 1) continue;
        if (nd > 0 && sx[nd - 1] == x_strides[d] * shape[d] && sy[nd - 1] == y_strides[d] * shape[d]) {
            sh[nd - 1] *= shape[d];
            sx[nd - 1] = x_strides[d];
            sy[nd - 1] = y_strides[d];
            continue;
        }
        sh[nd] = shape[d];
        sx[nd] = x_strides[d];
        sy[nd] = y_strides[d];
        nd++;
    }
    if (nd == 0) {
        sh[0] = 1;
        sx[0] = sy[0] = 0;
        nd = 1;
    }
    ptrdiff_t es = dtype == PLAST_DT_F32 ? 4 : 8;
    ptrdiff_t inner = sh[nd - 1], outer = 1;
    for (int d = 0; d < nd - 1; d++) outer *= sh[d];
    ptrdiff_t per_row = (inner + CHUNK - 1) / CHUNK;
    ptrdiff_t tasks = outer * per_row;
    int nt = nthreads;
    if (outer * inner < 2 * CHUNK || tasks < 2) nt = 1;
    if (nt > tasks) nt = (int)tasks;
    const un_job j = {simd, op, dtype, nd, sh, sx, sy, es, inner, per_row, x, y};
    PLAST_PARALLEL_FOR(nt, tasks, un_task, &j);
    return 0;
}
