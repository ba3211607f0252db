#include "xent.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plast_omp.h"

/* float32 bodies at every level (vec_levels.h), then float64 ones (vec_levels_f64.h) */
#define PLAST_VEC_BODY "xent_simd.h"
#define VT             float
#define VT_F64         0
#include "vec_levels.h"
#undef VT
#define VT double
#include "vec_levels_f64.h"
#undef VT

#define GRAIN 16384

static int threads_for(int nthreads, ptrdiff_t work, ptrdiff_t tasks) {
    if (nthreads <= 1 || work < 2 * GRAIN || tasks < 2) return 1;
    ptrdiff_t t = work / GRAIN;
    if (t > tasks) t = tasks;
    return t < nthreads ? (int)t : nthreads;
}

static inline int64_t target_at(const int64_t *t64, const int32_t *t32, ptrdiff_t r) {
    return t64 ? t64[r] : (int64_t)t32[r];
}

#define VT       float
#define OP3      plast_op3
#define KN(name) name
#define PN(name) name##_f32
#include "xent_driver.h"
#undef VT
#undef OP3
#undef KN
#undef PN

#define VT       double
#define OP3      plast_op3_f64
#define KN(name) name##_f64
#define PN(name) name##_f64
#include "xent_driver.h"
#undef VT
#undef OP3
#undef KN
#undef PN
