#include "softmax.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plast_omp.h"

/* float32 bodies at every level (vec_levels.h), then float64 ones (vec_levels_f64.h) */
#define PLAST_VEC_BODY "softmax_simd.h"
#define VT             float
#define VT_F64         0
#include "vec_levels.h"
#undef VT
#define VT double
#include "vec_levels_f64.h"
#undef VT

/* Work (elements) below which a call stays on one thread. */
#define GRAIN 16384

static int threads_for(int nthreads, ptrdiff_t work, ptrdiff_t tasks) {
    if (nthreads <= 1 || work < 2 * GRAIN || tasks < 2) return 1;
    ptrdiff_t t = work / GRAIN;
    if (t > tasks) t = tasks;
    return t < nthreads ? (int)t : nthreads;
}

#define VT       float
#define OP3      plast_op3
#define KN(name) name
#define PN(name) name##_f32
#include "softmax_driver.h"
#undef VT
#undef OP3
#undef KN
#undef PN

#define VT       double
#define OP3      plast_op3_f64
#define KN(name) name##_f64
#define PN(name) name##_f64
#include "softmax_driver.h"
#undef VT
#undef OP3
#undef KN
#undef PN
