/* Portable GEMM kernels: plain C with GCC/Clang generic vectors (16 bytes), which the compiler lowers to the
 * baseline instruction set (SSE2 on x86-64, NEON on arm64, scalar code elsewhere). 4 x 8 float / 4 x 4 double
 * micro-tiles. This path runs everywhere and is the reference the SIMD paths are tested against. */
#include <string.h>

#include "gemm_internal.h"

#define G_TRANSPOSE  PLAST_X86
#define GMR4_LIST(X) X(1) X(2) X(3) X(4)

typedef float gemm_v4f __attribute__((vector_size(16)));
typedef double gemm_v2d __attribute__((vector_size(16)));

static inline gemm_v4f gemm_ld_v4f(const float *p) {
    gemm_v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void gemm_st_v4f(float *p, gemm_v4f v) { memcpy(p, &v, sizeof v); }
static inline gemm_v4f gemm_ldm_v4f(const float *p, int n) {
    gemm_v4f v = {0, 0, 0, 0};
    for (int i = 0; i < n; i++) v[i] = p[i];
    return v;
}
static inline void gemm_stm_v4f(float *p, int n, gemm_v4f v) {
    for (int i = 0; i < n; i++) p[i] = v[i];
}
static inline gemm_v2d gemm_ld_v2d(const double *p) {
    gemm_v2d v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void gemm_st_v2d(double *p, gemm_v2d v) { memcpy(p, &v, sizeof v); }
static inline gemm_v2d gemm_ldm_v2d(const double *p, int n) {
    gemm_v2d v = {0, 0};
    for (int i = 0; i < n; i++) v[i] = p[i];
    return v;
}
static inline void gemm_stm_v2d(double *p, int n, gemm_v2d v) {
    for (int i = 0; i < n; i++) p[i] = v[i];
}

/* ---- float ---- */
#define GT       float
#define GS       f32
#define G_IS_F32 1
#define GSFX     f32_scalar
#define GTARGET
#define GV                gemm_v4f
#define GVL               4
#define GMR               4
#define GMR_LIST          GMR4_LIST
#define GKC               256
#define GNB               256
#define GMB               512
#define GUNROLL           1
#define GMASK             int
#define G_MASK(n)         (n)
#define G_ZERO()          ((gemm_v4f){0, 0, 0, 0})
#define G_SET1(x)         ((gemm_v4f){0, 0, 0, 0} + (float)(x))
#define G_LOAD(p)         gemm_ld_v4f(p)
#define G_STORE(p, v)     gemm_st_v4f((p), (v))
#define G_LOADM(p, m)     gemm_ldm_v4f((p), (m))
#define G_STOREM(p, m, v) gemm_stm_v4f((p), (m), (v))
#define G_ADD(a, b)       ((a) + (b))
#define G_MUL(a, b)       ((a) * (b))
#define G_FMA(a, b, c)    ((a) * (b) + (c))
#define GVEC_ACT          0
#include "gemm_kernels.h"

/* ---- double ---- */
#define GT       double
#define GS       f64
#define G_IS_F32 0
#define GSFX     f64_scalar
#define GTARGET
#define GV                gemm_v2d
#define GVL               2
#define GMR               4
#define GMR_LIST          GMR4_LIST
#define GKC               256
#define GNB               256
#define GMB               512
#define GUNROLL           1
#define GMASK             int
#define G_MASK(n)         (n)
#define G_ZERO()          ((gemm_v2d){0, 0})
#define G_SET1(x)         ((gemm_v2d){0, 0} + (double)(x))
#define G_LOAD(p)         gemm_ld_v2d(p)
#define G_STORE(p, v)     gemm_st_v2d((p), (v))
#define G_LOADM(p, m)     gemm_ldm_v2d((p), (m))
#define G_STOREM(p, m, v) gemm_stm_v2d((p), (m), (v))
#define G_ADD(a, b)       ((a) + (b))
#define G_MUL(a, b)       ((a) * (b))
#define G_FMA(a, b, c)    ((a) * (b) + (c))
#define GVEC_ACT          0
#include "gemm_kernels.h"
