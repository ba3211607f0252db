// scatter_reduce (sum, prod, mean, amax, amin; include_self or not) without atomics, deterministic for every
// dtype. Three steps, launched by kernels.py: scatter_reduce_keys turns each source element into the offset of
// the output element it lands on (checking its index); the launcher sorts those keys stably with sort.cu's
// kernels; scatter_reduce_apply_<dtype> gives every run of equal keys to one thread, which folds the run in the
// original order (scatter_reduce.cuh), so the result equals the CPU's numpy ufunc.at bit for bit.
#include "common.cuh"
#include "scatter_reduce.cuh"

__device__ __forceinline__ int64_t sr_load_index(const void *idx, int i64, int64_t off) {
    return i64 ? static_cast<const int64_t *>(idx)[off] : (int64_t)static_cast<const int32_t *>(idx)[off];
}

// keys[i] = offset in the (contiguous) output of source element i: lout holds the output's strides over the
// index's shape with 0 along `dim`, plus index[i] * od. A bad index flags the error and leaves key -1.
extern "C" __global__ void scatter_reduce_keys(const void *idx, int i64, Layout lidx, Layout lout, int64_t size,
                                               int64_t od, int64_t n, int64_t *keys, int64_t *err) {
    PLAST_GRID_LOOP(i, n) {
        const int64_t v = sr_load_index(idx, i64, layout_offset(lidx, i));
        if (v < 0 || v >= size) {
            plast_set_error(err, PLAST_ERR_INDEX, v, size, i);
            keys[i] = -1;
        } else {
            keys[i] = layout_offset(lout, i) + v * od;
        }
    }
}

// order: the source positions sorted by key (ties in source order). The thread at the start of each run of
// equal keys folds the whole run into out[key]; out already holds the input.
template <typename T>
__device__ __forceinline__ void scatter_reduce_apply_body(int op, int include_self, const T *src, Layout lsrc,
                                                          const int64_t *keys, const int64_t *order, int64_t n,
                                                          T *out) {
    PLAST_GRID_LOOP(p, n) {
        int64_t end;
        const int64_t key = plast_scatter_reduce_run_at(keys, order, n, p, &end);
        if (key < 0) continue;
        const int64_t *run = order + p;
        out[key] = plast_scatter_reduce_run<T>(op, include_self, out[key], end - p,
                                               [&](int64_t q) { return src[layout_offset(lsrc, run[q])]; });
    }
}

#define SCATTER_REDUCE(SUF, T)                                                                                         \
    extern "C" __global__ void scatter_reduce_apply_##SUF(int op, int include_self, const T *src, Layout lsrc,         \
                                                          const int64_t *keys, const int64_t *order, int64_t n,        \
                                                          T *out) {                                                    \
        scatter_reduce_apply_body<T>(op, include_self, src, lsrc, keys, order, n, out);                                \
    }

SCATTER_REDUCE(u8, uint8_t)
SCATTER_REDUCE(i32, int32_t)
SCATTER_REDUCE(i64, int64_t)
SCATTER_REDUCE(f32, float)
SCATTER_REDUCE(f64, double)
