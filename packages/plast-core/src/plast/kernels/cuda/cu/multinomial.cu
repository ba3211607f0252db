// multinomial: category indices drawn per row of weights w (rows, cats) from float64 uniforms u (contiguous).
// The math is multinomial.cuh's (the CPU kernel's steps); kernels.py launches
// * with replacement: multinomial_cdf_<w dtype> (one thread per row: the running sums must be summed in order to
//   round as numpy's cumsum does), then multinomial_sample (one thread per draw: a binary search);
// * without: multinomial_keys_<w dtype> (a block per row), then sort.cu's stable descending sort of the keys,
//   keeping the first num_samples indices.
// Weights that are negative, inf or NaN, and rows without a positive weight, set the error flag (value
// PLAST_MN_BAD_WEIGHT / PLAST_MN_NO_POSITIVE, position = row): kernels.py raises the CPU's RuntimeError.
#include "common.cuh"
#include "multinomial.cuh"

template <typename W>
__device__ __forceinline__ void multinomial_cdf_body(const W *w, int64_t s0, int64_t s1, int64_t rows, int64_t cats,
                                                     double *cdf, int64_t *last, int64_t *err) {
    PLAST_GRID_LOOP(r, rows) {
        int64_t bad;
        const int64_t l = plast_mn_cdf_row<W>(w + r * s0, s1, cats, cdf + r * cats, &bad);
        last[r] = l;
        if (bad >= 0) plast_set_error(err, PLAST_ERR_VALUE, PLAST_MN_BAD_WEIGHT, bad, r);
        else if (l < 0) plast_set_error(err, PLAST_ERR_VALUE, PLAST_MN_NO_POSITIVE, 0, r);
    }
}

template <typename W>
__device__ __forceinline__ void multinomial_keys_body(const W *w, int64_t s0, int64_t s1, const double *u, int64_t rows,
                                                      int64_t cats, double *keys, int64_t *err) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        bool positive = false;
        for (int64_t j = threadIdx.x; j < cats; j += blockDim.x) {
            const double v = (double)w[r * s0 + j * s1];
            if (!plast_mn_weight_ok(v)) plast_set_error(err, PLAST_ERR_VALUE, PLAST_MN_BAD_WEIGHT, j, r);
            positive = positive || v > 0.0;
            keys[r * cats + j] = plast_mn_key(v, u[r * cats + j]);
        }
        if (!__syncthreads_or(positive) && threadIdx.x == 0)
            plast_set_error(err, PLAST_ERR_VALUE, PLAST_MN_NO_POSITIVE, 0, r);
    }
}

extern "C" {

__global__ void multinomial_cdf_f32(const float *w, int64_t s0, int64_t s1, int64_t rows, int64_t cats, double *cdf,
                                    int64_t *last, int64_t *err) {
    multinomial_cdf_body<float>(w, s0, s1, rows, cats, cdf, last, err);
}

__global__ void multinomial_cdf_f64(const double *w, int64_t s0, int64_t s1, int64_t rows, int64_t cats, double *cdf,
                                    int64_t *last, int64_t *err) {
    multinomial_cdf_body<double>(w, s0, s1, rows, cats, cdf, last, err);
}

// out (rows, ns) int64; u (rows, ns) float64, contiguous
__global__ void multinomial_sample(const double *cdf, const int64_t *last, const double *u, int64_t rows, int64_t cats,
                                   int64_t ns, int64_t *out) {
    PLAST_GRID_LOOP(e, rows * ns) {
        const int64_t r = e / ns;
        out[e] = plast_mn_search(cdf + r * cats, cats, last[r], u[e]);
    }
}

__global__ void multinomial_keys_f32(const float *w, int64_t s0, int64_t s1, const double *u, int64_t rows,
                                     int64_t cats, double *keys, int64_t *err) {
    multinomial_keys_body<float>(w, s0, s1, u, rows, cats, keys, err);
}

__global__ void multinomial_keys_f64(const double *w, int64_t s0, int64_t s1, const double *u, int64_t rows,
                                     int64_t cats, double *keys, int64_t *err) {
    multinomial_keys_body<double>(w, s0, s1, u, rows, cats, keys, err);
}

} // extern "C"
