// Sorting along one dim: argsort and topk. A row of up to 2048 elements is sorted in shared memory by one block
// (bitonic network); longer rows go through the same network in global memory, one launch per merge step.
//
// The order is stable in both directions (ties keep their original order, as the CPU's stable sort does) and
// NaN sorts as the largest value: each comparison looks at (value, original index) pairs.
#include "common.cuh"

#define SORT_SMEM_MAX 2048

// true when element a = (va, ia) must come before b = (vb, ib); ia < 0 marks padding, which always goes last
template <typename T> __device__ __forceinline__ bool sort_before(T va, int64_t ia, T vb, int64_t ib, int descending) {
    if (ia < 0) return false;
    if (ib < 0) return true;
    bool na = va != va, nb = vb != vb;
    if (na || nb) {
        if (na && nb) return ia < ib;
        return descending ? na : nb; // NaN is the largest
    }
    if (va == vb) return ia < ib;
    return descending ? va > vb : va < vb;
}

// One block per row: load (padded to n2, a power of two), sort, write the first k indices.
template <typename T>
__device__ __forceinline__ void sort_rows_smem_body(const T *x, Layout lrow, int64_t len, int64_t xs, int64_t n2,
                                                    int64_t *out, Layout orow, int64_t os, int64_t k, int64_t rows,
                                                    int descending) {
    __shared__ T sv[SORT_SMEM_MAX];
    __shared__ int32_t si[SORT_SMEM_MAX];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + layout_offset(lrow, row);
        for (int64_t i = threadIdx.x; i < n2; i += blockDim.x) {
            sv[i] = i < len ? xr[i * xs] : T(0);
            si[i] = i < len ? (int32_t)i : -1;
        }
        __syncthreads();
        for (int64_t size = 2; size <= n2; size <<= 1) {
            for (int64_t stride = size >> 1; stride > 0; stride >>= 1) {
                for (int64_t i = threadIdx.x; i < n2; i += blockDim.x) {
                    int64_t j = i ^ stride;
                    if (j > i) {
                        bool up = (i & size) == 0; // this pair sorts in the requested order
                        T a = sv[i], b = sv[j];
                        int32_t ia = si[i], ib = si[j];
                        bool swap =
                            up ? sort_before<T>(b, ib, a, ia, descending) : sort_before<T>(a, ia, b, ib, descending);
                        if (swap) {
                            sv[i] = b;
                            sv[j] = a;
                            si[i] = ib;
                            si[j] = ia;
                        }
                    }
                }
                __syncthreads();
            }
        }
        int64_t *orow_p = out + layout_offset(orow, row);
        for (int64_t i = threadIdx.x; i < k; i += blockDim.x) orow_p[i * os] = si[i];
        __syncthreads();
    }
}

// Global-memory network for long rows: keys/ids are (rows, n2) scratch arrays.
template <typename T>
__device__ __forceinline__ void sort_init_body(const T *x, Layout lrow, int64_t len, int64_t xs, int64_t n2,
                                               int64_t rows, T *keys, int64_t *ids) {
    PLAST_GRID_LOOP(e, rows * n2) {
        int64_t row = e / n2, i = e - row * n2;
        keys[e] = i < len ? x[layout_offset(lrow, row) + i * xs] : T(0);
        ids[e] = i < len ? i : -1;
    }
}

template <typename T>
__device__ __forceinline__ void sort_step_body(T *keys, int64_t *ids, int64_t n2, int64_t rows, int64_t size,
                                               int64_t stride, int descending) {
    PLAST_GRID_LOOP(e, rows * n2) {
        int64_t row = e / n2, i = e - row * n2, j = i ^ stride;
        if (j <= i) continue;
        int64_t a_off = row * n2 + i, b_off = row * n2 + j;
        bool up = (i & size) == 0;
        T a = keys[a_off], b = keys[b_off];
        int64_t ia = ids[a_off], ib = ids[b_off];
        bool swap = up ? sort_before<T>(b, ib, a, ia, descending) : sort_before<T>(a, ia, b, ib, descending);
        if (swap) {
            keys[a_off] = b;
            keys[b_off] = a;
            ids[a_off] = ib;
            ids[b_off] = ia;
        }
    }
}

__device__ __forceinline__ void sort_write_body(const int64_t *ids, int64_t n2, int64_t rows, int64_t k, int64_t *out,
                                                Layout orow, int64_t os) {
    PLAST_GRID_LOOP(e, rows * k) {
        int64_t row = e / k, i = e - row * k;
        out[layout_offset(orow, row) + i * os] = ids[row * n2 + i];
    }
}

#define SORT(SUF, T)                                                                                                   \
    extern "C" __global__ void sort_rows_smem_##SUF(const T *x, Layout lrow, int64_t len, int64_t xs, int64_t n2,      \
                                                    int64_t *out, Layout orow, int64_t os, int64_t k, int64_t rows,    \
                                                    int descending) {                                                  \
        sort_rows_smem_body<T>(x, lrow, len, xs, n2, out, orow, os, k, rows, descending);                              \
    }                                                                                                                  \
    extern "C" __global__ void sort_init_##SUF(const T *x, Layout lrow, int64_t len, int64_t xs, int64_t n2,           \
                                               int64_t rows, T *keys, int64_t *ids) {                                  \
        sort_init_body<T>(x, lrow, len, xs, n2, rows, keys, ids);                                                      \
    }                                                                                                                  \
    extern "C" __global__ void sort_step_##SUF(T *keys, int64_t *ids, int64_t n2, int64_t rows, int64_t size,          \
                                               int64_t stride, int descending) {                                       \
        sort_step_body<T>(keys, ids, n2, rows, size, stride, descending);                                              \
    }

SORT(i32, int32_t)
SORT(i64, int64_t)
SORT(f32, float)
SORT(f64, double)

extern "C" __global__ void sort_write(const int64_t *ids, int64_t n2, int64_t rows, int64_t k, int64_t *out,
                                      Layout orow, int64_t os) {
    sort_write_body(ids, n2, rows, k, out, orow, os);
}
