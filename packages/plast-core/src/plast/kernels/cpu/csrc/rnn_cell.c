#include "rnn_cell.h"

#include <math.h>

#include "plast_omp.h"

/* One call's operands, shared by the row functions (a row is the unit of work and of threading). s0 is the
 * previous state (c0 or h0); o0..o2 the outputs in the order of the entry's arguments. */
typedef struct {
    ptrdiff_t hsz;
    const float *gx, *gh, *s0, *dh, *ds;
    ptrdiff_t gx_row, gh_row, s0_row, dh_row, ds_row;
    float *o0, *o1, *o2;
} plast_rnn_row_f32;

typedef struct {
    ptrdiff_t hsz;
    const double *gx, *gh, *s0, *dh, *ds;
    ptrdiff_t gx_row, gh_row, s0_row, dh_row, ds_row;
    double *o0, *o1, *o2;
} plast_rnn_row_f64;

#define PLAST_VEC_BODY "rnn_cell_simd.h"
#define VT             float
#define VT_F64         0
#include "vec_levels.h"
#undef VT
#undef PLAST_VEC_BODY

static void lstm_row_f32(int simd, const plast_rnn_row_f32 *a, ptrdiff_t r) { PLAST_VEC_DISPATCH(lstm_row_f32, a, r); }
static void lstm_bw_row_f32(int simd, const plast_rnn_row_f32 *a, ptrdiff_t r) {
    PLAST_VEC_DISPATCH(lstm_bw_row_f32, a, r);
}
static void gru_row_f32(int simd, const plast_rnn_row_f32 *a, ptrdiff_t r) { PLAST_VEC_DISPATCH(gru_row_f32, a, r); }
static void gru_bw_row_f32(int simd, const plast_rnn_row_f32 *a, ptrdiff_t r) {
    PLAST_VEC_DISPATCH(gru_bw_row_f32, a, r);
}

/* float64: libm, the same formulas as rnn_cell_simd.h (written out, one element at a time) */
static inline double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }

static void lstm_row_f64(const plast_rnn_row_f64 *a, ptrdiff_t r) {
    const ptrdiff_t H = a->hsz;
    const double *gx = a->gx + r * a->gx_row, *gh = a->gh + r * a->gh_row, *c0 = a->s0 + r * a->s0_row;
    double *h = a->o0 + r * H, *c = a->o1 + r * H;
    for (ptrdiff_t j = 0; j < H; j++) {
        double i = sigm(gx[j] + gh[j]), f = sigm(gx[H + j] + gh[H + j]);
        double g = tanh(gx[2 * H + j] + gh[2 * H + j]), o = sigm(gx[3 * H + j] + gh[3 * H + j]);
        double cn = f * c0[j] + i * g;
        c[j] = cn;
        h[j] = o * tanh(cn);
    }
}

static void lstm_bw_row_f64(const plast_rnn_row_f64 *a, ptrdiff_t r) {
    const ptrdiff_t H = a->hsz;
    const double *gx = a->gx + r * a->gx_row, *gh = a->gh + r * a->gh_row, *c0 = a->s0 + r * a->s0_row;
    const double *dh = a->dh ? a->dh + r * a->dh_row : NULL, *dc = a->ds ? a->ds + r * a->ds_row : NULL;
    double *dg = a->o0 + r * 4 * H, *dc0 = a->o1 + r * H;
    for (ptrdiff_t j = 0; j < H; j++) {
        double i = sigm(gx[j] + gh[j]), f = sigm(gx[H + j] + gh[H + j]);
        double g = tanh(gx[2 * H + j] + gh[2 * H + j]), o = sigm(gx[3 * H + j] + gh[3 * H + j]);
        double cp = c0[j], tc = tanh(f * cp + i * g);
        double dhv = dh ? dh[j] : 0.0, dct = (dc ? dc[j] : 0.0) + dhv * o * (1.0 - tc * tc);
        dg[j] = dct * g * i * (1.0 - i);
        dg[H + j] = dct * cp * f * (1.0 - f);
        dg[2 * H + j] = dct * i * (1.0 - g * g);
        dg[3 * H + j] = dhv * tc * o * (1.0 - o);
        dc0[j] = dct * f;
    }
}

static void gru_row_f64(const plast_rnn_row_f64 *a, ptrdiff_t r) {
    const ptrdiff_t H = a->hsz;
    const double *gx = a->gx + r * a->gx_row, *gh = a->gh + r * a->gh_row, *h0 = a->s0 + r * a->s0_row;
    double *h = a->o0 + r * H;
    for (ptrdiff_t j = 0; j < H; j++) {
        double rg = sigm(gx[j] + gh[j]), z = sigm(gx[H + j] + gh[H + j]);
        double nn = tanh(gx[2 * H + j] + rg * gh[2 * H + j]);
        h[j] = nn + z * (h0[j] - nn);
    }
}

static void gru_bw_row_f64(const plast_rnn_row_f64 *a, ptrdiff_t r) {
    const ptrdiff_t H = a->hsz;
    const double *gx = a->gx + r * a->gx_row, *gh = a->gh + r * a->gh_row, *h0 = a->s0 + r * a->s0_row;
    const double *dh = a->dh + r * a->dh_row;
    double *dgx = a->o0 + r * 3 * H, *dgh = a->o1 + r * 3 * H, *dh0 = a->o2 + r * H;
    for (ptrdiff_t j = 0; j < H; j++) {
        double rg = sigm(gx[j] + gh[j]), z = sigm(gx[H + j] + gh[H + j]), hn = gh[2 * H + j];
        double nn = tanh(gx[2 * H + j] + rg * hn), g = dh[j];
        double dn = g * (1.0 - z) * (1.0 - nn * nn);
        double dz = g * (h0[j] - nn) * z * (1.0 - z);
        double dr = dn * hn * rg * (1.0 - rg);
        dgx[j] = dgh[j] = dr;
        dgx[H + j] = dgh[H + j] = dz;
        dgx[2 * H + j] = dn;
        dgh[2 * H + j] = dn * rg;
        dh0[j] = g * z;
    }
}

/* The Python layer checks shapes; these guard the sizes a wrong call could still pass (negative sizes, input
 * rows shorter than their gates). */
static int bad(ptrdiff_t n, ptrdiff_t hsz, ptrdiff_t gates, ptrdiff_t gx_row, ptrdiff_t gh_row, ptrdiff_t s0_row) {
    return n < 0 || hsz < 0 || (n > 1 && (gx_row < gates * hsz || gh_row < gates * hsz || s0_row < hsz));
}


int plast_lstm_cell_f32(int simd, int nthreads, ptrdiff_t n, ptrdiff_t hsz, const float *gx, ptrdiff_t gx_row,
                        const float *gh, ptrdiff_t gh_row, const float *c0, ptrdiff_t c0_row, float *h, float *c) {
    if (bad(n, hsz, 4, gx_row, gh_row, c0_row)) return -1;
    plast_rnn_row_f32 a = {hsz, gx, gh, c0, NULL, NULL, gx_row, gh_row, c0_row, 0, 0, h, c, NULL};
    PLAST_PARALLEL_FOR(nthreads, n, lstm_row_f32, simd, &a);
    return 0;
}

int plast_lstm_cell_f64(int nthreads, ptrdiff_t n, ptrdiff_t hsz, const double *gx, ptrdiff_t gx_row, const double *gh,
                        ptrdiff_t gh_row, const double *c0, ptrdiff_t c0_row, double *h, double *c) {
    if (bad(n, hsz, 4, gx_row, gh_row, c0_row)) return -1;
    plast_rnn_row_f64 a = {hsz, gx, gh, c0, NULL, NULL, gx_row, gh_row, c0_row, 0, 0, h, c, NULL};
    PLAST_PARALLEL_FOR(nthreads, n, lstm_row_f64, &a);
    return 0;
}

int plast_lstm_cell_bw_f32(int simd, int nthreads, ptrdiff_t n, ptrdiff_t hsz, const float *gx, ptrdiff_t gx_row,
                           const float *gh, ptrdiff_t gh_row, const float *c0, ptrdiff_t c0_row, const float *dh,
                           ptrdiff_t dh_row, const float *dc, ptrdiff_t dc_row, float *dgates, float *dc0) {
    if (bad(n, hsz, 4, gx_row, gh_row, c0_row)) return -1;
    plast_rnn_row_f32 a = {hsz, gx, gh, c0, dh, dc, gx_row, gh_row, c0_row, dh_row, dc_row, dgates, dc0, NULL};
    PLAST_PARALLEL_FOR(nthreads, n, lstm_bw_row_f32, simd, &a);
    return 0;
}

int plast_lstm_cell_bw_f64(int nthreads, ptrdiff_t n, ptrdiff_t hsz, const double *gx, ptrdiff_t gx_row,
                           const double *gh, ptrdiff_t gh_row, const double *c0, ptrdiff_t c0_row, const double *dh,
                           ptrdiff_t dh_row, const double *dc, ptrdiff_t dc_row, double *dgates, double *dc0) {
    if (bad(n, hsz, 4, gx_row, gh_row, c0_row)) return -1;
    plast_rnn_row_f64 a = {hsz, gx, gh, c0, dh, dc, gx_row, gh_row, c0_row, dh_row, dc_row, dgates, dc0, NULL};
    PLAST_PARALLEL_FOR(nthreads, n, lstm_bw_row_f64, &a);
    return 0;
}

int plast_gru_cell_f32(int simd, int nthreads, ptrdiff_t n, ptrdiff_t hsz, const float *gx, ptrdiff_t gx_row,
                       const float *gh, ptrdiff_t gh_row, const float *h0, ptrdiff_t h0_row, float *h) {
    if (bad(n, hsz, 3, gx_row, gh_row, h0_row)) return -1;
    plast_rnn_row_f32 a = {hsz, gx, gh, h0, NULL, NULL, gx_row, gh_row, h0_row, 0, 0, h, NULL, NULL};
    PLAST_PARALLEL_FOR(nthreads, n, gru_row_f32, simd, &a);
    return 0;
}

int plast_gru_cell_f64(int nthreads, ptrdiff_t n, ptrdiff_t hsz, const double *gx, ptrdiff_t gx_row, const double *gh,
                       ptrdiff_t gh_row, const double *h0, ptrdiff_t h0_row, double *h) {
    if (bad(n, hsz, 3, gx_row, gh_row, h0_row)) return -1;
    plast_rnn_row_f64 a = {hsz, gx, gh, h0, NULL, NULL, gx_row, gh_row, h0_row, 0, 0, h, NULL, NULL};
    PLAST_PARALLEL_FOR(nthreads, n, gru_row_f64, &a);
    return 0;
}

int plast_gru_cell_bw_f32(int simd, int nthreads, ptrdiff_t n, ptrdiff_t hsz, const float *gx, ptrdiff_t gx_row,
                          const float *gh, ptrdiff_t gh_row, const float *h0, ptrdiff_t h0_row, const float *dh,
                          ptrdiff_t dh_row, float *dgx, float *dgh, float *dh0) {
    if (bad(n, hsz, 3, gx_row, gh_row, h0_row) || !dh) return -1;
    plast_rnn_row_f32 a = {hsz, gx, gh, h0, dh, NULL, gx_row, gh_row, h0_row, dh_row, 0, dgx, dgh, dh0};
    PLAST_PARALLEL_FOR(nthreads, n, gru_bw_row_f32, simd, &a);
    return 0;
}

int plast_gru_cell_bw_f64(int nthreads, ptrdiff_t n, ptrdiff_t hsz, const double *gx, ptrdiff_t gx_row,
                          const double *gh, ptrdiff_t gh_row, const double *h0, ptrdiff_t h0_row, const double *dh,
                          ptrdiff_t dh_row, double *dgx, double *dgh, double *dh0) {
    if (bad(n, hsz, 3, gx_row, gh_row, h0_row) || !dh) return -1;
    plast_rnn_row_f64 a = {hsz, gx, gh, h0, dh, NULL, gx_row, gh_row, h0_row, dh_row, 0, dgx, dgh, dh0};
    PLAST_PARALLEL_FOR(nthreads, n, gru_bw_row_f64, &a);
    return 0;
}
