// Random fills from the Philox stream: thread b computes Philox block `offset + b` and writes the elements that
// block owns, so the numbers equal the CPU backend's for the same (seed, offset).
#include "common.cuh"
#include "philox.cuh"

extern "C" {

__global__ void philox_uniform_f32(uint64_t seed, uint64_t offset, float *out, int64_t n, float low, float high) {
    PLAST_GRID_LOOP(b, (n + 3) / 4) plast_philox_uniform_f32_block(seed, offset, b, out, n, low, high);
}

__global__ void philox_uniform_f64(uint64_t seed, uint64_t offset, double *out, int64_t n, double low, double high) {
    PLAST_GRID_LOOP(b, (n + 1) / 2) plast_philox_uniform_f64_block(seed, offset, b, out, n, low, high);
}

__global__ void philox_normal_f32(uint64_t seed, uint64_t offset, float *out, int64_t n, float mean, float std) {
    PLAST_GRID_LOOP(b, (n + 1) / 2) plast_philox_normal_f32_block(seed, offset, b, out, n, mean, std);
}

__global__ void philox_normal_f64(uint64_t seed, uint64_t offset, double *out, int64_t n, double mean, double std) {
    PLAST_GRID_LOOP(b, (n + 1) / 2) plast_philox_normal_f64_block(seed, offset, b, out, n, mean, std);
}

__global__ void philox_u32(uint64_t seed, uint64_t offset, uint32_t *out, int64_t n) {
    PLAST_GRID_LOOP(b, (n + 3) / 4) plast_philox_u32_block(seed, offset, b, out, n);
}

// The same fills with (seed, offset) read from device memory when the kernel runs: a CUDA graph replays its
// launches with the parameters they were captured with, so a jit plan replayed as a graph writes each fill's
// (seed, offset) to `state` before every launch and the numbers still follow the generator (graphs.py).

__global__ void philox_uniform_f32_devstate(const uint64_t *state, float *out, int64_t n, float low, float high) {
    uint64_t seed = state[0], offset = state[1];
    PLAST_GRID_LOOP(b, (n + 3) / 4) plast_philox_uniform_f32_block(seed, offset, b, out, n, low, high);
}

__global__ void philox_uniform_f64_devstate(const uint64_t *state, double *out, int64_t n, double low, double high) {
    uint64_t seed = state[0], offset = state[1];
    PLAST_GRID_LOOP(b, (n + 1) / 2) plast_philox_uniform_f64_block(seed, offset, b, out, n, low, high);
}

__global__ void philox_normal_f32_devstate(const uint64_t *state, float *out, int64_t n, float mean, float std) {
    uint64_t seed = state[0], offset = state[1];
    PLAST_GRID_LOOP(b, (n + 1) / 2) plast_philox_normal_f32_block(seed, offset, b, out, n, mean, std);
}

__global__ void philox_normal_f64_devstate(const uint64_t *state, double *out, int64_t n, double mean, double std) {
    uint64_t seed = state[0], offset = state[1];
    PLAST_GRID_LOOP(b, (n + 1) / 2) plast_philox_normal_f64_block(seed, offset, b, out, n, mean, std);
}

__global__ void philox_u32_devstate(const uint64_t *state, uint32_t *out, int64_t n) {
    uint64_t seed = state[0], offset = state[1];
    PLAST_GRID_LOOP(b, (n + 3) / 4) plast_philox_u32_block(seed, offset, b, out, n);
}

} // extern "C"
