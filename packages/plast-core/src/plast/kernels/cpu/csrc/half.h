/* Scalar conversions between float32 and the 16-bit floating types, bit-exact with torch's c10::BFloat16 and
 * c10::Half (round to nearest even). Shared by the 16-bit GEMM (gemm16.c) and the casts (convert16.c). */
#ifndef PLAST_HALF_H
#define PLAST_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float plast_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t plast_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float plast_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1fu) u = sign | 0x7f800000u | (man << 13);      /* inf, nan (payload kept) */
    else if (exp) u = sign | ((exp + 112u) << 23) | (man << 13); /* normal: bias 15 -> 127 */
    else {
        float f = (float)man * 0x1p-24f; /* zero or subnormal: man * 2^-24, exact */
        memcpy(&u, &f, sizeof u);
        u |= sign;
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t plast_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* nan: the quiet nan, sign kept (as c10::Half) */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* 65520 and above round to inf */
    if (a >= 0x38800000u) {                                  /* normal half (2^-14 and above) */
        const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    /* subnormal half: round(|f| * 2^24) under the default (nearest even) mode; 1024 is the smallest normal */
    return (uint16_t)(sign | (uint16_t)lrintf(fabsf(f) * 0x1p24f));
}

#endif /* PLAST_HALF_H */
