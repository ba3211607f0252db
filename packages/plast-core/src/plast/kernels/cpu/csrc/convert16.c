/* float32 <-> bfloat16 / float16 conversions (convert16.h): AVX-512 (16 lanes; float16 through vcvtps2ph), else
 * the scalar rules of half.h. Large arrays are split over threads in blocks. */
#include "convert16.h"

#include <stdint.h>

#include "half.h"
#include "plast_omp.h"
#include "plast_simd.h"

#define CV_BLOCK        ((ptrdiff_t)1 << 16) /* elements per thread task */
#define CV_PARALLEL_MIN ((ptrdiff_t)1 << 18) /* below this one thread is faster */

typedef void (*cv_fn)(const void *src, void *dst, ptrdiff_t n);

static void cv_bf16_f32_scalar(const void *s, void *d, ptrdiff_t n) {
    const uint16_t *src = (const uint16_t *)s;
    float *dst = (float *)d;
    for (ptrdiff_t i = 0; i < n; i++) dst[i] = plast_bf16_to_f32(src[i]);
}

static void cv_f32_bf16_scalar(const void *s, void *d, ptrdiff_t n) {
    const float *src = (const float *)s;
    uint16_t *dst = (uint16_t *)d;
    for (ptrdiff_t i = 0; i < n; i++) dst[i] = plast_f32_to_bf16(src[i]);
}

static void cv_f16_f32_scalar(const void *s, void *d, ptrdiff_t n) {
    const uint16_t *src = (const uint16_t *)s;
    float *dst = (float *)d;
    for (ptrdiff_t i = 0; i < n; i++) dst[i] = plast_f16_to_f32(src[i]);
}

static void cv_f32_f16_scalar(const void *s, void *d, ptrdiff_t n) {
    const float *src = (const float *)s;
    uint16_t *dst = (uint16_t *)d;
    for (ptrdiff_t i = 0; i < n; i++) dst[i] = plast_f32_to_f16(src[i]);
}

#if PLAST_X86
PLAST_TARGET_AVX512 static void cv_bf16_f32_avx512(const void *s, void *d, ptrdiff_t n) {
    const uint16_t *src = (const uint16_t *)s;
    float *dst = (float *)d;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_si512(dst + i, _mm512_slli_epi32(w, 16));
    }
    for (; i < n; i++) dst[i] = plast_bf16_to_f32(src[i]);
}

PLAST_TARGET_AVX512 static void cv_f32_bf16_avx512(const void *s, void *d, ptrdiff_t n) {
    const float *src = (const float *)s;
    uint16_t *dst = (uint16_t *)d;
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), qnan = _mm512_set1_epi32(0x7fc0);
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(src + i);
        const __m512i u = _mm512_castps_si512(x);
        const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), lsb), 16);
        r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, qnan);
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; i++) dst[i] = plast_f32_to_bf16(src[i]);
}

PLAST_TARGET_AVX512 static void cv_f16_f32_avx512(const void *s, void *d, ptrdiff_t n) {
    const uint16_t *src = (const uint16_t *)s;
    float *dst = (float *)d;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    for (; i < n; i++) dst[i] = plast_f16_to_f32(src[i]);
}

PLAST_TARGET_AVX512 static void cv_f32_f16_avx512(const void *s, void *d, ptrdiff_t n) {
    const float *src = (const float *)s;
    uint16_t *dst = (uint16_t *)d;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256((__m256i *)(dst + i), h);
    }
    for (; i < n; i++) dst[i] = plast_f32_to_f16(src[i]);
}
#endif

static void cv_task(cv_fn fn, const char *src, ptrdiff_t ss, char *dst, ptrdiff_t ds, ptrdiff_t n, ptrdiff_t t) {
    const ptrdiff_t lo = t * CV_BLOCK, len = n - lo < CV_BLOCK ? n - lo : CV_BLOCK;
    fn(src + lo * ss, dst + lo * ds, len);
}

int plast_convert16(int simd, int nthreads, int src_code, const void *src, int dst_code, void *dst, ptrdiff_t n) {
    cv_fn fn = NULL;
    ptrdiff_t ss = 2, ds = 4;
    const int v = PLAST_X86 && simd >= PLAST_SIMD_AVX512;
    if (src_code == PLAST_DT_BF16 && dst_code == PLAST_DT_F32) fn = cv_bf16_f32_scalar;
    else if (src_code == PLAST_DT_F16 && dst_code == PLAST_DT_F32) fn = cv_f16_f32_scalar;
    else if (src_code == PLAST_DT_F32 && dst_code == PLAST_DT_BF16) fn = cv_f32_bf16_scalar, ss = 4, ds = 2;
    else if (src_code == PLAST_DT_F32 && dst_code == PLAST_DT_F16) fn = cv_f32_f16_scalar, ss = 4, ds = 2;
    else return 1;
#if PLAST_X86
    if (v) {
        if (fn == cv_bf16_f32_scalar) fn = cv_bf16_f32_avx512;
        else if (fn == cv_f16_f32_scalar) fn = cv_f16_f32_avx512;
        else if (fn == cv_f32_bf16_scalar) fn = cv_f32_bf16_avx512;
        else fn = cv_f32_f16_avx512;
    }
#else
    (void)v;
#endif
    if (n <= 0) return 0;
    const ptrdiff_t tasks = (n + CV_BLOCK - 1) / CV_BLOCK;
    const int nt = n >= CV_PARALLEL_MIN ? nthreads : 1;
    PLAST_PARALLEL_FOR(nt, tasks, cv_task, fn, (const char *)src, ss, (char *)dst, ds, n);
    return 0;
}
