// reduce_prod_excl (prod's third and higher derivatives) along one dim: one thread per row, prod_excl.cuh's two
// passes. x is strided (rows by lrow, xs along the dim); the r vectors come packed by the launcher as g (r, rows,
// len), contiguous; out is strided like x (orow, os). pre (rows * len << r) and suf (rows << r) are scratch.
#include "common.cuh"
#include "prod_excl.cuh"

template <typename T>
__device__ __forceinline__ void prod_excl_body(const T *x, Layout lrow, int64_t xs, const T *g, int r, T *out,
                                               Layout orow, int64_t os, T *pre, T *suf, int64_t len, int64_t n_rows) {
    const int64_t m = (int64_t)1 << r;
    PLAST_GRID_LOOP(row, n_rows) {
        plast_prod_excl_row<T>(x + layout_offset(lrow, row), xs, g + row * len, n_rows * len, r, len,
                               out + layout_offset(orow, row), os, pre + row * len * m, suf + row * m);
    }
}

#define PROD_EXCL(SUF, T)                                                                                              \
    extern "C" __global__ void prod_excl_##SUF(const T *x, Layout lrow, int64_t xs, const T *g, int r, T *out,         \
                                               Layout orow, int64_t os, T *pre, T *suf, int64_t len, int64_t n_rows) { \
        prod_excl_body<T>(x, lrow, xs, g, r, out, orow, os, pre, suf, len, n_rows);                                    \
    }

PROD_EXCL(f32, float)
PROD_EXCL(f64, double)
