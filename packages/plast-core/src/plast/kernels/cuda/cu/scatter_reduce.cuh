// scatter_reduce's arithmetic, shared by the CUDA kernel (scatter_reduce.cu) and a host build in the tests
// (tests/test_cuda_kernels_extra.py compiles this header with g++ and checks it against the CPU backend).
//
// The CPU kernel (kernels/cpu/kernels_indexing.py) applies numpy's ufunc.at: every position starts from x (or
// from the reduction's neutral element with include_self=False) and takes the source values aimed at it one by
// one, in the index tensor's row-major order. The CUDA kernel sorts the source elements by destination (stably)
// and one thread folds each destination's run in that same order, so results are deterministic and equal the
// CPU's bit for bit: sums and products round exactly as numpy's, with no FMA (each step is one operation).
#pragma once

#include <math.h>
#include <stdint.h>

#include "codes.h" // PLAST_SR_*: scatter_reduce's reduce= (plast/_core/codes.h)

#ifdef __CUDACC__
#define PLAST_SR_HD __host__ __device__ __forceinline__
#define PLAST_SR_MEMBER __host__ __device__ __forceinline__
#else
#define PLAST_SR_HD static inline
#define PLAST_SR_MEMBER inline
#endif

// Per dtype: the combining step, the neutral element and mean's division. uint8_t is plast's bool.
template <typename T> struct SrArith;

template <typename T> struct SrFloat {
    // numpy's maximum/minimum: the accumulator wins ties and NaN (either side) propagates
    static PLAST_SR_MEMBER T step(int op, T acc, T v) {
        switch (op) {
        case PLAST_SR_PROD: return acc * v;
        case PLAST_SR_AMAX: return (acc >= v || acc != acc) ? acc : v;
        case PLAST_SR_AMIN: return (acc <= v || acc != acc) ? acc : v;
        default: return acc + v;  // sum, mean
        }
    }
    static PLAST_SR_MEMBER T neutral(int op) {
        if (op == PLAST_SR_PROD) return T(1);
        if (op == PLAST_SR_AMAX) return -T(INFINITY);
        if (op == PLAST_SR_AMIN) return T(INFINITY);
        return T(0);
    }
    // numpy divides float32 by the int64 counts in float64, then stores float32 (the same value as a float32
    // division: double rounding is harmless for a quotient)
    static PLAST_SR_MEMBER T mean(T acc, int64_t n) { return T((double)acc / (double)n); }
};
template <> struct SrArith<float> : SrFloat<float> {};
template <> struct SrArith<double> : SrFloat<double> {};

template <typename T, typename U> struct SrInt {
    // sums and products wrap around like numpy's integers (unsigned arithmetic: no signed overflow)
    static PLAST_SR_MEMBER T step(int op, T acc, T v) {
        switch (op) {
        case PLAST_SR_PROD: return (T)((U)acc * (U)v);
        case PLAST_SR_AMAX: return acc >= v ? acc : v;
        case PLAST_SR_AMIN: return acc <= v ? acc : v;
        default: return (T)((U)acc + (U)v);
        }
    }
    static PLAST_SR_MEMBER T neutral(int op) {
        const T hi = (T)(((U)1 << (8 * sizeof(T) - 1)) - 1);
        if (op == PLAST_SR_PROD) return T(1);
        if (op == PLAST_SR_AMAX) return (T)(-hi - 1);
        if (op == PLAST_SR_AMIN) return hi;
        return T(0);
    }
    // np.floor_divide in int64 (integer mean rounds down, like torch)
    static PLAST_SR_MEMBER T mean(T acc, int64_t n) {
        const int64_t a = (int64_t)acc;
        int64_t q = a / n;
        if ((a % n != 0) && ((a < 0) != (n < 0))) q -= 1;
        return (T)q;
    }
};
template <> struct SrArith<int32_t> : SrInt<int32_t, uint32_t> {};
template <> struct SrArith<int64_t> : SrInt<int64_t, uint64_t> {};

template <> struct SrArith<uint8_t> {
    // numpy's bool ufuncs: add is or, multiply is and, maximum is or, minimum is and (mean is refused earlier)
    static PLAST_SR_MEMBER uint8_t step(int op, uint8_t acc, uint8_t v) {
        return (op == PLAST_SR_PROD || op == PLAST_SR_AMIN) ? (uint8_t)(acc && v) : (uint8_t)(acc || v);
    }
    static PLAST_SR_MEMBER uint8_t neutral(int op) { return (op == PLAST_SR_PROD || op == PLAST_SR_AMIN) ? 1 : 0; }
    static PLAST_SR_MEMBER uint8_t mean(uint8_t acc, int64_t) { return acc; }
};

// One destination's value: `self` (the input's value there) folded with the `count` source values get(0),
// get(1), ... in order; include_self = 0 starts from the neutral element instead. Mean divides by the number of
// values that took part.
template <typename T, typename Get>
PLAST_SR_HD T plast_scatter_reduce_run(int op, int include_self, T self, int64_t count, Get get) {
    T acc = include_self ? self : SrArith<T>::neutral(op);
    for (int64_t q = 0; q < count; q++) acc = SrArith<T>::step(op, acc, get(q));
    if (op == PLAST_SR_MEAN) acc = SrArith<T>::mean(acc, count + (include_self ? 1 : 0));
    return acc;
}

// Slot p of the sorted order starts a run of equal keys when p == 0 or its key differs from slot p - 1's: then
// the run's end (exclusive) goes to *end and the key (the output offset) is returned, else -1.
PLAST_SR_HD int64_t plast_scatter_reduce_run_at(const int64_t *keys, const int64_t *order, int64_t n, int64_t p,
                                                int64_t *end) {
    const int64_t key = keys[order[p]];
    if (p > 0 && keys[order[p - 1]] == key) return -1;
    int64_t e = p + 1;
    while (e < n && keys[order[e]] == key) e++;
    *end = e;
    return key;
}
