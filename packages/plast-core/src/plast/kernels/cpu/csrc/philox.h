/* Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
 *
 * Counter-based: block b of the stream is philox(counter = (b_lo, b_hi, 0, 0), key = seed). Any element can be
 * computed independently, so threads (and the CUDA backend) produce exactly the same numbers for a seed.
 * `offset` counts 128-bit blocks already consumed by the generator.
 *
 * Element layouts (what the CUDA kernels must reproduce):
 *   uniform f32: element i <- lane i%4 of block offset + i/4, as (x >> 8) * 2^-24        (n/4 blocks)
 *   uniform f64: element i <- lanes (0,1) or (2,3) of block offset + i/2, 53 bits       (n/2 blocks)
 *   normal  f32: elements 2p, 2p+1 <- Box-Muller of lanes 0,1 of block offset + p       (n/2 blocks)
 *   normal  f64: elements 2p, 2p+1 <- Box-Muller of 53-bit (lanes 0,1), (lanes 2,3)     (n/2 blocks)
 *   u32:         element i <- lane i%4 of block offset + i/4                            (n/4 blocks)
 */
#ifndef PLAST_PHILOX_H
#define PLAST_PHILOX_H

#include <stddef.h>
#include <stdint.h>

void plast_philox_block(uint64_t seed, uint64_t block, uint32_t out[4]);
void plast_philox_uniform_f32(int nthreads, uint64_t seed, uint64_t offset, float *out, ptrdiff_t n, float low,
                              float high);
void plast_philox_uniform_f64(int nthreads, uint64_t seed, uint64_t offset, double *out, ptrdiff_t n, double low,
                              double high);
void plast_philox_normal_f32(int nthreads, uint64_t seed, uint64_t offset, float *out, ptrdiff_t n, float mean,
                             float std);
void plast_philox_normal_f64(int nthreads, uint64_t seed, uint64_t offset, double *out, ptrdiff_t n, double mean,
                             double std);
void plast_philox_u32(int nthreads, uint64_t seed, uint64_t offset, uint32_t *out, ptrdiff_t n);

#endif
