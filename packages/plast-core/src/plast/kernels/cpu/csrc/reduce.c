#include "reduce.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plast_omp.h"

/* float32 bodies at every level (vec_levels.h), then float64 ones (vec_levels_f64.h) */
#define PLAST_VEC_BODY "reduce_simd.h"
#define VT             float
#define VT_F64         0
#define RD_COLS        4096
#include "vec_levels.h"
#undef VT
#undef RD_COLS
/* float64 column blocks are half as wide: the block accumulators and the totals fit where float32's did */
#define VT      double
#define RD_COLS 2048
#include "vec_levels_f64.h"
#undef VT
#undef RD_COLS

#define GRAIN 32768
/* a long row splits into chunks of this many elements, reduced in parallel and combined */
#define CHUNK 65536

static int threads_for(int nthreads, ptrdiff_t work, ptrdiff_t tasks) {
    if (nthreads <= 1 || work < 2 * GRAIN || tasks < 2) return 1;
    ptrdiff_t t = work / GRAIN;
    if (t > tasks) t = tasks;
    return t < nthreads ? (int)t : nthreads;
}

static double combine(int op, double a, double b) {
    if (op == PLAST_RD_SUM) return a + b;
    if (a != a || b != b) return NAN;
    return op == PLAST_RD_MAX ? (a > b ? a : b) : (a < b ? a : b);
}

/* the n partial results of one row: sums pairwise (a long row keeps its log2 error growth), max/min in order */
static double combine_all(int op, const double *v, ptrdiff_t n) {
    if (n == 1) return v[0];
    if (op == PLAST_RD_SUM) return combine_all(op, v, n / 2) + combine_all(op, v + n / 2, n - n / 2);
    double r = v[0];
    for (ptrdiff_t i = 1; i < n; i++) r = combine(op, r, v[i]);
    return r;
}

#define VT       float
#define OP3      plast_op3
#define RD_COLS  4096
#define KN(name) name
#define PN(name) name##_f32
#include "reduce_driver.h"
#undef VT
#undef OP3
#undef RD_COLS
#undef KN
#undef PN

#define VT       double
#define OP3      plast_op3_f64
#define RD_COLS  2048
#define KN(name) name##_f64
#define PN(name) name##_f64
#include "reduce_driver.h"
#undef VT
#undef OP3
#undef RD_COLS
#undef KN
#undef PN
