#include "philox.h"

#include <math.h>

#include "plast_omp.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void plast_philox_block(uint64_t seed, uint64_t block, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

static inline float u01_f32(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
static inline double u01_f64(uint32_t hi, uint32_t lo) {
    uint64_t v = ((uint64_t)hi << 21) ^ (uint64_t)(lo >> 11); /* 53 bits */
    return (double)v * (1.0 / 9007199254740992.0);
}

#define BLOCKS_PER_TASK 4096
/* Threads for NBLOCKS blocks: tasks of BLOCKS_PER_TASK blocks, all of nthreads once there are two tasks. */
#define PHILOX_THREADS(NBLOCKS) (((NBLOCKS) + BLOCKS_PER_TASK - 1) / BLOCKS_PER_TASK > 1 ? nthreads : 1)
/* for (b ...) over thread tid of T's share (whole tasks) of blocks [0, NBLOCKS); the loop body follows. */
#define PHILOX_BLOCKS(NBLOCKS)                                                                                         \
    ptrdiff_t t0_, t1_;                                                                                                \
    plast_omp_range(((NBLOCKS) + BLOCKS_PER_TASK - 1) / BLOCKS_PER_TASK, tid, T, &t0_, &t1_);                          \
    for (ptrdiff_t b = t0_ * BLOCKS_PER_TASK; b < (NBLOCKS) && b < t1_ * BLOCKS_PER_TASK; b++)

static void uniform_f32_part(uint64_t seed, uint64_t offset, float *out, ptrdiff_t n, float low, float high, int tid,
                             int T) {
    float scale = high - low;
    PHILOX_BLOCKS((n + 3) / 4) {
        uint32_t r[4];
        plast_philox_block(seed, offset + (uint64_t)b, r);
        for (int l = 0; l < 4 && b * 4 + l < n; l++) {
            float v = low + scale * u01_f32(r[l]);
            /* low + scale*u can round up to `high`; keep the interval half-open as documented */
            out[b * 4 + l] = v < high ? v : low;
        }
    }
}

void plast_philox_uniform_f32(int nthreads, uint64_t seed, uint64_t offset, float *out, ptrdiff_t n, float low,
                              float high) {
    PLAST_PARALLEL(PHILOX_THREADS((n + 3) / 4), uniform_f32_part, seed, offset, out, n, low, high);
}

static void uniform_f64_part(uint64_t seed, uint64_t offset, double *out, ptrdiff_t n, double low, double high, int tid,
                             int T) {
    double scale = high - low;
    PHILOX_BLOCKS((n + 1) / 2) {
        uint32_t r[4];
        plast_philox_block(seed, offset + (uint64_t)b, r);
        for (int l = 0; l < 2 && b * 2 + l < n; l++) {
            double v = low + scale * u01_f64(r[2 * l], r[2 * l + 1]);
            out[b * 2 + l] = v < high ? v : low;
        }
    }
}

void plast_philox_uniform_f64(int nthreads, uint64_t seed, uint64_t offset, double *out, ptrdiff_t n, double low,
                              double high) {
    PLAST_PARALLEL(PHILOX_THREADS((n + 1) / 2), uniform_f64_part, seed, offset, out, n, low, high);
}

static void normal_f32_part(uint64_t seed, uint64_t offset, float *out, ptrdiff_t n, float mean, float std, int tid,
                            int T) {
    PHILOX_BLOCKS((n + 1) / 2) {
        uint32_t r[4];
        plast_philox_block(seed, offset + (uint64_t)b, r);
        /* u1 in (0, 1] so the log is finite */
        double u1 = ((double)(r[0] >> 8) + 1.0) * (1.0 / 16777216.0);
        double u2 = (double)(r[1] >> 8) * (1.0 / 16777216.0);
        double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
        out[b * 2] = (float)(mean + std * rad * cos(th));
        if (b * 2 + 1 < n) out[b * 2 + 1] = (float)(mean + std * rad * sin(th));
    }
}

void plast_philox_normal_f32(int nthreads, uint64_t seed, uint64_t offset, float *out, ptrdiff_t n, float mean,
                             float std) {
    PLAST_PARALLEL(PHILOX_THREADS((n + 1) / 2), normal_f32_part, seed, offset, out, n, mean, std);
}

static void normal_f64_part(uint64_t seed, uint64_t offset, double *out, ptrdiff_t n, double mean, double std, int tid,
                            int T) {
    PHILOX_BLOCKS((n + 1) / 2) {
        uint32_t r[4];
        plast_philox_block(seed, offset + (uint64_t)b, r);
        double u1 = 1.0 - u01_f64(r[0], r[1]); /* (0, 1] */
        double u2 = u01_f64(r[2], r[3]);
        double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
        out[b * 2] = mean + std * rad * cos(th);
        if (b * 2 + 1 < n) out[b * 2 + 1] = mean + std * rad * sin(th);
    }
}

void plast_philox_normal_f64(int nthreads, uint64_t seed, uint64_t offset, double *out, ptrdiff_t n, double mean,
                             double std) {
    PLAST_PARALLEL(PHILOX_THREADS((n + 1) / 2), normal_f64_part, seed, offset, out, n, mean, std);
}

static void u32_part(uint64_t seed, uint64_t offset, uint32_t *out, ptrdiff_t n, int tid, int T) {
    PHILOX_BLOCKS((n + 3) / 4) {
        uint32_t r[4];
        plast_philox_block(seed, offset + (uint64_t)b, r);
        for (int l = 0; l < 4 && b * 4 + l < n; l++) out[b * 4 + l] = r[l];
    }
}

void plast_philox_u32(int nthreads, uint64_t seed, uint64_t offset, uint32_t *out, ptrdiff_t n) {
    PLAST_PARALLEL(PHILOX_THREADS((n + 3) / 4), u32_part, seed, offset, out, n);
}
