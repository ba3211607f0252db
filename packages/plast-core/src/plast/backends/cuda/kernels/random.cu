// Random fills from the Philox stream: thread b computes Philox block `offset + b` and writes the elements that
// block owns, so the numbers equal the CPU backend's for the same (seed, offset).
#include "common.cuh"
#include "philox.cuh"

extern "C" {

__global__ void philox_uniform_f32(uint64_t seed, uint64_t offset, float *out, int64_t n, float low, float high) {
    PLAST_GRID_LOOP(b, (n + 3) / 4) plast_philox_uniform_f32_block(seed, offset, b, out, n, low, high);
}

__global__ void philox_uniform_f64(uint64_t seed, uint64_t offset, double *out, int64_t n, double low,
                                   double high) {
    PLAST_GRID_LOOP(b, (n + 1) / 2) plast_philox_uniform_f64_block(seed, offset, b, out, n, low, high);
}

__global__ void philox_normal_f32(uint64_t seed, uint64_t offset, float *out, int64_t n, float mean, float std) {
    PLAST_GRID_LOOP(b, (n + 1) / 2) plast_philox_normal_f32_block(seed, offset, b, out, n, mean, std);
}

__global__ void philox_normal_f64(uint64_t seed, uint64_t offset, double *out, int64_t n, double mean,
                                  double std) {
    PLAST_GRID_LOOP(b, (n + 1) / 2) plast_philox_normal_f64_block(seed, offset, b, out, n, mean, std);
}

__global__ void philox_u32(uint64_t seed, uint64_t offset, uint32_t *out, int64_t n) {
    PLAST_GRID_LOOP(b, (n + 3) / 4) plast_philox_u32_block(seed, offset, b, out, n);
}

}  // extern "C"
