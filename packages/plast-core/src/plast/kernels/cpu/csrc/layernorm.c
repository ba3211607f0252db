#include "layernorm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plast_omp.h"

/* float32 bodies at every level (vec_levels.h), then float64 ones (vec_levels_f64.h) */
#define PLAST_VEC_BODY "layernorm_simd.h"
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

#define VT       float
#define KN(name) name
#define PN(name) name##_f32
#include "layernorm_driver.h"
#undef VT
#undef KN
#undef PN

#define VT       double
#define KN(name) name##_f64
#define PN(name) name##_f64
#include "layernorm_driver.h"
#undef VT
#undef KN
#undef PN
