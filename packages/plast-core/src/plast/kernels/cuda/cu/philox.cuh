// Philox 4x32-10, the same stream as the CPU backend (kernels/cpu/csrc/philox.h documents the layout):
// block b of a stream is philox(counter = (b_lo, b_hi, 0, 0), key = (seed_lo, seed_hi)); `offset` counts
// 128-bit blocks the generator already used.
//
// Everything here is plain C++ usable on the host and the device, so a CPU test can compile this header with
// gcc and check, number for number, that it reproduces the CPU generator (tests/test_cuda_compile.py).
#pragma once

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define PLAST_HD __host__ __device__ __forceinline__
#else
#define PLAST_HD static inline
#endif

#define PLAST_PHILOX_M0 0xD2511F53u
#define PLAST_PHILOX_M1 0xCD9E8D57u
#define PLAST_PHILOX_W0 0x9E3779B9u
#define PLAST_PHILOX_W1 0xBB67AE85u

PLAST_HD void plast_philox_block(uint64_t seed, uint64_t block, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PLAST_PHILOX_M0 * c0, p1 = (uint64_t)PLAST_PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += PLAST_PHILOX_W0;
        k1 += PLAST_PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

// 24 random bits -> [0, 1) in float
PLAST_HD float plast_u01_f32(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

// 53 random bits from two lanes -> [0, 1) in double
PLAST_HD double plast_u01_f64(uint32_t hi, uint32_t lo) {
    uint64_t v = ((uint64_t)hi << 21) ^ (uint64_t)(lo >> 11);
    return (double)v * (1.0 / 9007199254740992.0);
}

// The element layouts, one Philox block at a time: `b` is the block index relative to `offset`, and each
// function writes the elements that block owns (4 for uniform f32 / u32, 2 otherwise), stopping at n.
PLAST_HD void plast_philox_uniform_f32_block(uint64_t seed, uint64_t offset, int64_t b, float *out, int64_t n,
                                             float low, float high) {
    uint32_t r[4];
    plast_philox_block(seed, offset + (uint64_t)b, r);
    float scale = high - low;
    for (int l = 0; l < 4 && b * 4 + l < n; l++) {
        float v = low + scale * plast_u01_f32(r[l]);
        out[b * 4 + l] = v < high ? v : low;  // keep [low, high) half-open, as the CPU does
    }
}

PLAST_HD void plast_philox_uniform_f64_block(uint64_t seed, uint64_t offset, int64_t b, double *out, int64_t n,
                                             double low, double high) {
    uint32_t r[4];
    plast_philox_block(seed, offset + (uint64_t)b, r);
    double scale = high - low;
    for (int l = 0; l < 2 && b * 2 + l < n; l++) {
        double v = low + scale * plast_u01_f64(r[2 * l], r[2 * l + 1]);
        out[b * 2 + l] = v < high ? v : low;
    }
}

PLAST_HD void plast_philox_normal_f32_block(uint64_t seed, uint64_t offset, int64_t b, float *out, int64_t n,
                                            float mean, float std) {
    uint32_t r[4];
    plast_philox_block(seed, offset + (uint64_t)b, r);
    // u1 in (0, 1] so the log is finite; Box-Muller in double, as on the CPU
    double u1 = ((double)(r[0] >> 8) + 1.0) * (1.0 / 16777216.0);
    double u2 = (double)(r[1] >> 8) * (1.0 / 16777216.0);
    double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
    out[b * 2] = (float)(mean + std * rad * cos(th));
    if (b * 2 + 1 < n) out[b * 2 + 1] = (float)(mean + std * rad * sin(th));
}

PLAST_HD void plast_philox_normal_f64_block(uint64_t seed, uint64_t offset, int64_t b, double *out, int64_t n,
                                            double mean, double std) {
    uint32_t r[4];
    plast_philox_block(seed, offset + (uint64_t)b, r);
    double u1 = 1.0 - plast_u01_f64(r[0], r[1]);  // (0, 1]
    double u2 = plast_u01_f64(r[2], r[3]);
    double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
    out[b * 2] = mean + std * rad * cos(th);
    if (b * 2 + 1 < n) out[b * 2 + 1] = mean + std * rad * sin(th);
}

PLAST_HD void plast_philox_u32_block(uint64_t seed, uint64_t offset, int64_t b, uint32_t *out, int64_t n) {
    uint32_t r[4];
    plast_philox_block(seed, offset + (uint64_t)b, r);
    for (int l = 0; l < 4 && b * 4 + l < n; l++) out[b * 4 + l] = r[l];
}
