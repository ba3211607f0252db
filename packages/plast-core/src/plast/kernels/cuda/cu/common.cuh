// Shared helpers of plast's CUDA kernels: strided layouts, the device error flag, warp/block reductions.
//
// Every kernel is an `extern "C"` entry point named `<family>_<dtype>` (f32, f64, i32, i64, u8 for bool): the
// loader looks kernels up by these names, and each .cu file lists its instantiations explicitly at the bottom.
#pragma once

#include <stdint.h>

#include "abi.cuh"
#include "codes.h"


__device__ __forceinline__ int64_t layout_offset(const Layout &L, int64_t i) {
    if (L.ndim == 1) return i * L.stride[0];
    int64_t off = 0;
#pragma unroll
    for (int d = PLAST_MAX_DIMS - 1; d >= 0; --d) {
        if (d < L.ndim) {
            int64_t s = L.shape[d];
            int64_t q = i / s;
            off += (i - q * s) * L.stride[d];
            i = q;
        }
    }
    return off;
}

// ---- error flag ---------------------------------------------------------------------------------------------
// err points at 4 int64 in device memory: [code, value, bound, position]. The first failing thread wins; the
// launcher zeroes the flag before a checked kernel, reads it back after, and raises the matching Python error.
// The codes are PLAST_ERR_* (plast/_core/codes.h).
__device__ __forceinline__ void plast_set_error(int64_t *err, int64_t code, int64_t value, int64_t bound,
                                                int64_t pos) {
    if (err == nullptr) return;
    unsigned long long *e = reinterpret_cast<unsigned long long *>(err);
    if (atomicCAS(e, 0ull, (unsigned long long)code) == 0ull) {
        err[1] = value;
        err[2] = bound;
        err[3] = pos;
    }
}

// ---- reductions ---------------------------------------------------------------------------------------------
template <typename T> __device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename T> __device__ __forceinline__ T warp_max(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        T w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 T in shared memory; the call synchronizes the block twice.
template <typename T> __device__ __forceinline__ T block_sum(T v, T *scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < nwarps ? scratch[lane] : T(0);
    return warp_sum(v);
}

template <typename T> __device__ __forceinline__ T block_max(T v, T *scratch, T lowest) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < nwarps ? scratch[lane] : lowest;
    return warp_max(v);
}

template <typename T> struct Limits;
template <> struct Limits<float> {
    static __device__ __forceinline__ float inf() { return __int_as_float(0x7f800000); }
    static __device__ __forceinline__ float nan() { return __int_as_float(0x7fc00000); }
};
template <> struct Limits<double> {
    static __device__ __forceinline__ double inf() { return __longlong_as_double(0x7ff0000000000000ll); }
    static __device__ __forceinline__ double nan() { return __longlong_as_double(0x7ff8000000000000ll); }
};

// Grid-stride loop over n elements with 64-bit indices.
#define PLAST_GRID_LOOP(i, n)                                                                              \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                              \
         i += (int64_t)blockDim.x * gridDim.x)
