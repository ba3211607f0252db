/* GEMM kernels for AVX-512 (F, DQ, BW, VL): 12 x 32 float / 12 x 16 double micro-tiles, 24 zmm accumulators. */
#include "gemm_internal.h"

#if PLAST_X86

#define G_TRANSPOSE   2 /* AVX 8x8 (float) / 4x4 (double) block transposes */
#define GMR12_LIST(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12)

/* ---- float ---- */
#define GT       float
#define GS       f32
#define G_IS_F32 1
#define GSFX     f32_avx512
#define GTARGET  PLAST_TARGET_AVX512
#define GMR      12
#define GMR_LIST GMR12_LIST
#define GKC      384
#define GNB      480
#define GMB      1536
#define GUNROLL  4
#include "gemm_avx512_f32.h"
#include "gemm_kernels.h"

/* ---- double ---- */
#define GT                double
#define GS                f64
#define G_IS_F32          0
#define GSFX              f64_avx512
#define GTARGET           PLAST_TARGET_AVX512
#define GV                __m512d
#define GVL               8
#define GMR               12
#define GMR_LIST          GMR12_LIST
#define GKC               256
#define GNB               240
#define GMB               1536
#define GUNROLL           4
#define GMASK             __mmask8
#define G_MASK(n)         ((__mmask8)((1u << (n)) - 1u))
#define G_ZERO()          _mm512_setzero_pd()
#define G_SET1(x)         _mm512_set1_pd(x)
#define G_LOAD(p)         _mm512_loadu_pd(p)
#define G_STORE(p, v)     _mm512_storeu_pd((p), (v))
#define G_LOADM(p, m)     _mm512_maskz_loadu_pd((m), (p))
#define G_STOREM(p, m, v) _mm512_mask_storeu_pd((p), (m), (v))
#define G_ADD             _mm512_add_pd
#define G_MUL             _mm512_mul_pd
#define G_FMA             _mm512_fmadd_pd
#define GVEC_ACT          0
#include "gemm_kernels.h"

#endif /* PLAST_X86 */
