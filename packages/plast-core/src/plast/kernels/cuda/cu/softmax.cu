// softmax / log_softmax along one dim, and their backward passes. One block per row (a row is the dim being
// normalized; `lrow` maps row numbers to base offsets, `s` is the stride along the dim), block reductions with
// warp shuffles. Outputs have their own row layout so any dim works without a transpose.
#include "common.cuh"

// safe: a row that is -inf everywhere gives zeros instead of NaN (fully masked attention rows)
template <typename T>
__device__ __forceinline__ void softmax_fwd_body(const T *x, Layout lx, int64_t sx, T *y, Layout ly, int64_t sy,
                                                 int64_t K, int64_t rows, int log_mode, int safe) {
    __shared__ T scratch[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + layout_offset(lx, row);
        T *yr = y + layout_offset(ly, row);
        T m = -Limits<T>::inf();
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
            T v = xr[k * sx];
            m = (v > m || v != v) ? v : m;
        }
        m = block_max<T>(m, scratch, -Limits<T>::inf());
        if (safe && m == -Limits<T>::inf()) m = T(0);
        T s = T(0);
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) s += exp(xr[k * sx] - m);
        s = block_sum<T>(s, scratch);
        if (log_mode) {
            T ls = log(s);
            for (int64_t k = threadIdx.x; k < K; k += blockDim.x) yr[k * sy] = (xr[k * sx] - m) - ls;
        } else {
            if (safe && s == T(0)) s = T(1);
            T inv = T(1) / s;
            for (int64_t k = threadIdx.x; k < K; k += blockDim.x) yr[k * sy] = exp(xr[k * sx] - m) * inv;
        }
        __syncthreads();
    }
}

// softmax:     gx = y * (g - sum(g * y))
// log_softmax: gx = g - exp(y) * sum(g)
template <typename T>
__device__ __forceinline__ void softmax_bwd_body(const T *g, Layout lg, int64_t sg, const T *y, Layout ly, int64_t sy,
                                                 T *gx, Layout lo, int64_t so, int64_t K, int64_t rows, int log_mode) {
    __shared__ T scratch[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *gr = g + layout_offset(lg, row);
        const T *yr = y + layout_offset(ly, row);
        T *outr = gx + layout_offset(lo, row);
        T s = T(0);
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) s += log_mode ? gr[k * sg] : gr[k * sg] * yr[k * sy];
        s = block_sum<T>(s, scratch);
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
            T gv = gr[k * sg], yv = yr[k * sy];
            outr[k * so] = log_mode ? gv - exp(yv) * s : (gv - s) * yv;
        }
        __syncthreads();
    }
}

#define SOFTMAX(SUF, T)                                                                                                \
    extern "C" __global__ void softmax_fwd_##SUF(const T *x, Layout lx, int64_t sx, T *y, Layout ly, int64_t sy,       \
                                                 int64_t K, int64_t rows, int log_mode, int safe) {                    \
        softmax_fwd_body<T>(x, lx, sx, y, ly, sy, K, rows, log_mode, safe);                                            \
    }                                                                                                                  \
    extern "C" __global__ void softmax_bwd_##SUF(const T *g, Layout lg, int64_t sg, const T *y, Layout ly, int64_t sy, \
                                                 T *gx, Layout lo, int64_t so, int64_t K, int64_t rows,                \
                                                 int log_mode) {                                                       \
        softmax_bwd_body<T>(g, lg, sg, y, ly, sy, gx, lo, so, K, rows, log_mode);                                      \
    }
SOFTMAX(f32, float)
SOFTMAX(f64, double)
