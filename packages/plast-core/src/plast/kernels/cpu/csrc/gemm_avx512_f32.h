/* The AVX-512 float vector macros of the GEMM templates (gemm_kernels.h, gemm_act.h): one zmm of 16 floats.
 * Included by gemm_avx512.c for its float kernels and by gemm16.c for the 16-bit GEMM's epilogue; each
 * includer defines GT GS GSFX GTARGET itself, and gemm_kernels.h undefines everything at its end. */
#define GV                __m512
#define GVL               16
#define GMASK             __mmask16
#define G_MASK(n)         ((__mmask16)((1u << (n)) - 1u))
#define G_ZERO()          _mm512_setzero_ps()
#define G_SET1(x)         _mm512_set1_ps(x)
#define G_LOAD(p)         _mm512_loadu_ps(p)
#define G_STORE(p, v)     _mm512_storeu_ps((p), (v))
#define G_LOADM(p, m)     _mm512_maskz_loadu_ps((m), (p))
#define G_STOREM(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define G_ADD             _mm512_add_ps
#define G_SUB             _mm512_sub_ps
#define G_MUL             _mm512_mul_ps
#define G_DIV             _mm512_div_ps
#define G_MIN             _mm512_min_ps
#define G_MAX             _mm512_max_ps
#define G_FMA             _mm512_fmadd_ps
#define G_RELU(x)         _mm512_max_ps(_mm512_setzero_ps(), (x))
#define G_ABS             _mm512_abs_ps
#define G_ROUND(x)        _mm512_roundscale_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define G_LDEXP(y, n)     _mm512_scalef_ps((y), (n))
#define G_SELNEG(x, a, b) _mm512_mask_blend_ps(_mm512_cmp_ps_mask((x), _mm512_setzero_ps(), _CMP_LT_OQ), (b), (a))
#define GVEC_ACT          1
