// layer_norm over the trailing N elements of each row (contiguous rows; the launcher copies strided input first).
// Forward writes y and, per row, mean and rstd (the CPU kernel's three outputs); backward writes gx per row
// and the weight/bias gradients as deterministic column sums (no atomics).
#include "common.cuh"

template <typename T>
__device__ __forceinline__ void layer_norm_fwd_body(const T *x, const T *w, const T *b, T *y, T *mean_o, T *rstd_o,
                                                    int64_t rows, int64_t N, T eps) {
    __shared__ T scratch[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + row * N;
        T *yr = y + row * N;
        T s = T(0);
        for (int64_t k = threadIdx.x; k < N; k += blockDim.x) s += xr[k];
        T mean = block_sum<T>(s, scratch) / T(N);
        T v = T(0);
        for (int64_t k = threadIdx.x; k < N; k += blockDim.x) {
            T d = xr[k] - mean;
            v += d * d;
        }
        T var = block_sum<T>(v, scratch) / T(N);
        T rstd = T(1) / sqrt(var + eps);
        for (int64_t k = threadIdx.x; k < N; k += blockDim.x) {
            T r = (xr[k] - mean) * rstd;
            if (w != nullptr) r *= w[k];
            if (b != nullptr) r += b[k];
            yr[k] = r;
        }
        if (threadIdx.x == 0) {
            mean_o[row] = mean;
            rstd_o[row] = rstd;
        }
        __syncthreads();
    }
}

// gx = rstd * (gxh - mean(gxh) - xhat * mean(gxh * xhat)), gxh = gy * w
template <typename T>
__device__ __forceinline__ void layer_norm_bwd_rows_body(const T *gy, const T *x, const T *mean, const T *rstd,
                                                         const T *w, T *gx, int64_t rows, int64_t N) {
    __shared__ T scratch[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *gr = gy + row * N, *xr = x + row * N;
        const T mu = mean[row], rs = rstd[row];
        T s1 = T(0), s2 = T(0);
        for (int64_t k = threadIdx.x; k < N; k += blockDim.x) {
            T gh = w != nullptr ? gr[k] * w[k] : gr[k];
            s1 += gh;
            s2 += gh * (xr[k] - mu) * rs;
        }
        s1 = block_sum<T>(s1, scratch) / T(N);
        s2 = block_sum<T>(s2, scratch) / T(N);
        for (int64_t k = threadIdx.x; k < N; k += blockDim.x) {
            T gh = w != nullptr ? gr[k] * w[k] : gr[k];
            T xh = (xr[k] - mu) * rs;
            gx[row * N + k] = rs * (gh - s1 - xh * s2);
        }
        __syncthreads();
    }
}

// gw[j] = sum_r gy[r, j] * xhat[r, j], gb[j] = sum_r gy[r, j]. Block (32, 8): 32 columns, 8 row groups.
template <typename T>
__device__ __forceinline__ void layer_norm_bwd_cols_body(const T *gy, const T *x, const T *mean, const T *rstd, T *gw,
                                                         T *gb, int64_t rows, int64_t N) {
    __shared__ T sw[8][33], sb[8][33];
    const int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
    T aw = T(0), ab = T(0);
    if (j < N) {
        for (int64_t r = threadIdx.y; r < rows; r += 8) {
            T g = gy[r * N + j];
            ab += g;
            aw += g * (x[r * N + j] - mean[r]) * rstd[r];
        }
    }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && j < N) {
        for (int k = 1; k < 8; k++) {
            aw += sw[k][threadIdx.x];
            ab += sb[k][threadIdx.x];
        }
        gw[j] = aw;
        gb[j] = ab;
    }
}

#define LAYER_NORM(SUF, T)                                                                                             \
    extern "C" __global__ void layer_norm_fwd_##SUF(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd,        \
                                                    int64_t rows, int64_t N, T eps) {                                  \
        layer_norm_fwd_body<T>(x, w, b, y, mean, rstd, rows, N, eps);                                                  \
    }                                                                                                                  \
    extern "C" __global__ void layer_norm_bwd_rows_##SUF(const T *gy, const T *x, const T *mean, const T *rstd,        \
                                                         const T *w, T *gx, int64_t rows, int64_t N) {                 \
        layer_norm_bwd_rows_body<T>(gy, x, mean, rstd, w, gx, rows, N);                                                \
    }                                                                                                                  \
    extern "C" __global__ void layer_norm_bwd_cols_##SUF(const T *gy, const T *x, const T *mean, const T *rstd, T *gw, \
                                                         T *gb, int64_t rows, int64_t N) {                             \
        layer_norm_bwd_cols_body<T>(gy, x, mean, rstd, gw, gb, rows, N);                                               \
    }
LAYER_NORM(f32, float)
LAYER_NORM(f64, double)
